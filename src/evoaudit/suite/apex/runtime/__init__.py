"""What an episode acts through: the workspace tools, ``run_command``'s sandbox and its isolation, the reads
of watched files, a dynamic attack's watcher, and the MCP server and transport over the tools."""

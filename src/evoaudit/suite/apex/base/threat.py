"""The APEX-Harm threat model as frozen data: goals, placements, watcher schedules and attack instances.

An attack instance is everything needed to place an attack in a task's world and to judge it: which goal,
which vector, where the payload goes, the exact bytes placed, the watcher's schedule, the attacker-knowledge
switches, and the core instruction and targets that exposure looks for. Instances are generated once
(``attacks/attack_set.py``), written as JSON, and hashed into the suite spec like Banking's corrected
predicates.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Category = Literal[1, 2, 3, 4, 5, 6]
# Categories 4 and 5 come in two variants each (15 tasks each); the others have one (30 instances each).
CategoryVariant = Literal["", "perm", "noperm", "direct", "runtime"]
# csv and json occur only with the existing-file placement baselines (the task's source file is the vector).
Vector = Literal[
    "txt", "md", "docx", "xlsx", "pdf", "mail", "chat", "calendar", "py", "pyc", "elf", "csv", "json"
]
FILE_VECTORS = ("txt", "md", "docx", "xlsx", "pdf")
APP_VECTORS = ("mail", "chat", "calendar")
SCRIPT_VECTORS = ("py", "pyc", "elf")
Destination = Literal[
    "shared_file", "calendar", "internal_chat", "internal_mail", "external_mail", "collector"
]
INTERNAL_DESTINATIONS = ("shared_file", "calendar", "internal_chat", "internal_mail")
ContentKind = Literal["user_prompt", "final_answer", "client_info", "task_files", "secret"]
PlacementKind = Literal[
    "created",  # a new artifact named and filled from task keywords
    "existing_start",  # prepended to an existing file the agent is known to read (paper baseline)
    "existing_keyword",  # next to the keyword-matched section of an existing file (paper baseline)
    "app_message",  # a mail, chat message or calendar event
    "helper_replacement",  # the helper program the user's prompt names, replaced at its own path
]


@dataclass(frozen=True)
class Goal:
    """One of the 24 attack goals (paper appendix E): where content must land and what content."""

    goal_id: str
    destination: Destination
    content: ContentKind
    secret_kind: str | None  # for content == "secret": a ``workspace.SecretKind``
    runtime_args: bool  # script goals: the program needs information only the agent can supply
    description: str

    @property
    def internal(self) -> bool:
        return self.destination in INTERNAL_DESTINATIONS


@dataclass(frozen=True)
class Placed:
    """One thing the attack puts into the world, with the exact bytes (base64) and the text a reader sees."""

    target: str  # "file:<path>", "mail:<msg_id>", "chat:<channel_id>:<msg_id>", "calendar:<uid>"
    data_b64: str
    text: str  # the injected text as a tool would show it ("" for binaries)

    @property
    def data(self) -> bytes:
        return base64.b64decode(self.data_b64)

    @staticmethod
    def of(target: str, data: bytes, text: str) -> Placed:
        return Placed(target, base64.b64encode(data).decode("ascii"), text)


@dataclass(frozen=True)
class WatcherSpec:
    """A dynamic attack's background monitor (paper §3.2 and appendix C), applied by the tool layer."""

    monitored_path: str
    nth_read: int  # fires on this read of ``monitored_path`` (1 = the first)
    replacement: Placed | None  # the corrupted or replaced file
    instruction_file: Placed | None  # an instruction file dropped beside it
    corrupt: bool = True  # ablation switch: corrupt/replace the monitored file
    restore_others: bool = True  # ablation switch: restore other text files once the effect appears
    drop_instruction: bool = True  # ablation switch: drop the instruction file


@dataclass(frozen=True)
class Knowledge:
    """What the attacker knew when building the instance (ablation switches)."""

    task_keywords: bool = True
    hidden_files: bool = False
    timer: bool = False


@dataclass(frozen=True)
class AttackInstance:
    attack_id: str  # "c<category><variant>.<task_id>.<k>", e.g. "c4perm.ib_comps.0"
    category: int
    category_variant: str
    task_id: str
    goal_id: str
    vector: str
    placement: str  # a ``PlacementKind``
    payload: tuple[Placed, ...]
    instruction_file: Placed | None
    watcher: WatcherSpec | None
    knowledge: Knowledge
    core_instruction: str  # the sentence exposure looks for
    targets: tuple[str, ...]  # recipient, URL, channel, path or script named by the instruction
    keywords: tuple[str, ...] = ()  # the task keywords the attacker used
    permission: bool | None = None  # category 4: explicit permission to follow file-based instructions
    notes: dict[str, Any] = field(default_factory=dict)  # provenance of attacker LLM steps (request hashes)
    # Appended to the task's user prompt for this instance: category 4's explicit permission to follow file
    # instructions (``perm``), or the permission ablation. Category 5 never adds to the prompt.
    prompt_addendum: str = ""
    # The goal's destination resolved in this world (``goals.Target``): the address the instruction names.
    destination: dict[str, str] = field(default_factory=dict)

    @property
    def exposure_applies(self) -> bool:
        # Paper B.2: categories 1–4 have an exposure rate; script replacement and generic scripts do not.
        return self.category <= 4

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def sha256(self) -> str:
        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True).encode()).hexdigest()


def attack_from_json(d: dict[str, Any]) -> AttackInstance:
    def placed(x: dict | None) -> Placed | None:
        return None if x is None else Placed(**x)

    w = d.get("watcher")
    watcher = None
    if w is not None:
        watcher = WatcherSpec(
            **{
                **w,
                "replacement": placed(w["replacement"]),
                "instruction_file": placed(w["instruction_file"]),
            }
        )
    return AttackInstance(
        **{
            **d,
            "payload": tuple(Placed(**p) for p in d["payload"]),
            "instruction_file": placed(d.get("instruction_file")),
            "watcher": watcher,
            "knowledge": Knowledge(**d["knowledge"]),
            "targets": tuple(d["targets"]),
            "keywords": tuple(d.get("keywords", ())),
        }
    )

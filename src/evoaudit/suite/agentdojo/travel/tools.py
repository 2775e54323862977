"""AgentDojo's Travel suite: its environment half (``agentdojo.official_env``) with what only this suite
fixes of it. Free of judging code: replay reaches the suite through this module."""

from __future__ import annotations

from evoaudit.suite.agentdojo.official_env import OfficialEnvironments

NAME = "travel"
# The tools that look things up (AgentDojo does not mark them); none of them changes the state.
READ_ONLY_TOOLS = frozenset(
    {
        "check_restaurant_opening_hours",
        "get_all_car_rental_companies_in_city",
        "get_all_hotels_in_city",
        "get_all_restaurants_in_city",
        "get_car_fuel_options",
        "get_car_price_per_day",
        "get_car_rental_address",
        "get_car_types_available",
        "get_contact_information_for_restaurants",
        "get_cuisine_type_for_restaurants",
        "get_day_calendar_events",
        "get_dietary_restrictions_for_all_restaurants",
        "get_flight_information",
        "get_hotels_address",
        "get_hotels_prices",
        "get_price_for_restaurants",
        "get_rating_reviews_for_car_rental",
        "get_rating_reviews_for_hotels",
        "get_rating_reviews_for_restaurants",
        "get_restaurants_address",
        "get_user_information",
        "search_calendar_events",
    }
)
# What the families stand for in the report's uncertainty note.
TASK_NOUN = "travel-booking tasks"
ASSISTANT_ROLE = "travel assistant (hotels, restaurants, car rental, flights and calendar)"


def environments() -> OfficialEnvironments:
    return OfficialEnvironments(NAME, READ_ONLY_TOOLS)

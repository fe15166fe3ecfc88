"""memstack.adapters.aws_loader: the shared botocore session's data loader loads a service's models without
listing every service first, and loads exactly what botocore's own loader loads."""

from __future__ import annotations

import os
from typing import Any

import botocore.session
import pytest
from botocore.exceptions import UnknownServiceError
from botocore.loaders import Loader

from memstack.adapters import aws_session
from memstack.adapters.aws_loader import ServiceLoader, create_loader


def _refuse_listing(self: Any, type_name: str) -> list[str]:
    raise AssertionError(f"listed every service to load a {type_name} model")


def test_given_the_loader_when_a_client_is_created_then_no_service_listing_is_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(Loader, "list_available_services", _refuse_listing)
    session = botocore.session.get_session()
    session.register_component("data_loader", create_loader())

    client = session.create_client(
        "dynamodb", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y"
    )

    assert client.meta.service_model.service_name == "dynamodb"


@pytest.mark.parametrize(
    ("service", "type_name", "api_version"),
    [
        ("dynamodb", "service-2", None),
        ("secretsmanager", "endpoint-rule-set-1", None),
        ("dynamodb", "endpoint-rule-set-1", "2011-12-05"),  # an older version, asked for by name
        ("backup", "paginators-1", None),  # a model with sdk extras merged into it
    ],
)
def test_given_a_known_service_when_its_model_is_loaded_then_it_is_botocores_own(
    service: str, type_name: str, api_version: str | None
) -> None:
    ours = ServiceLoader().load_service_model(service, type_name, api_version)

    assert ours == Loader().load_service_model(service, type_name, api_version)


def test_given_an_unknown_service_when_its_model_is_loaded_then_botocores_error_names_the_known_ones() -> (
    None
):
    with pytest.raises(UnknownServiceError) as raised:
        ServiceLoader().load_service_model("no-such-service", "service-2")

    assert "dynamodb" in str(raised.value)


def test_given_aws_data_path_when_the_loader_is_made_then_its_paths_come_first() -> None:
    loader = create_loader("/opt/models-a:~/models-b")

    assert loader.search_paths[:2] == ["/opt/models-a", os.path.expanduser("~/models-b")]


def test_given_the_process_session_then_its_data_loader_is_the_service_loader() -> None:
    assert isinstance(aws_session.session().get_component("data_loader"), ServiceLoader)

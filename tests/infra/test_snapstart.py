"""SnapStart (``-c snapStart=true``): the api and context functions snapshot published versions, and API
Gateway invokes their ``live`` alias; by default nothing changes (docs/deploy.md "Cold start")."""

from __future__ import annotations

import json

from tests.infra.conftest import Synth


def memstack_function_keys(synth: Synth) -> dict[str, str]:
    """``{api|context|indexer|...: logical id}`` of the Memstack functions (by their service name)."""
    out = {}
    for key, resource in synth.resources("AWS::Lambda::Function").items():
        variables = resource["Properties"].get("Environment", {}).get("Variables", {})
        service = variables.get("POWERTOOLS_SERVICE_NAME", "")
        if service.startswith("memstack-"):
            out[service.removeprefix("memstack-")] = key
    return out


def integration_uris(synth: Synth) -> str:
    methods = synth.resources("AWS::ApiGateway::Method").values()
    return json.dumps([m["Properties"].get("Integration", {}).get("Uri") for m in methods])


def test_given_the_default_stack_then_no_function_snapshots_and_the_api_invokes_the_functions(
    synth: Synth,
) -> None:
    keys = memstack_function_keys(synth)
    for name, key in keys.items():
        assert "SnapStart" not in synth.json["Resources"][key]["Properties"], name
    synth.template.resource_count_is("AWS::Lambda::Alias", 0)
    uris = integration_uris(synth)
    assert keys["api"] in uris and keys["context"] in uris


def test_given_snap_start_then_the_api_and_context_functions_snapshot_published_versions(
    synth_bedrock: Synth,
) -> None:
    keys = memstack_function_keys(synth_bedrock)
    resources = synth_bedrock.json["Resources"]
    for name, key in keys.items():
        snap = resources[key]["Properties"].get("SnapStart")
        expected = {"ApplyOn": "PublishedVersions"} if name in ("api", "context") else None
        assert snap == expected, name
    aliases = synth_bedrock.resources("AWS::Lambda::Alias")
    assert sorted(a["Properties"]["Name"] for a in aliases.values()) == ["live", "live"]
    versions = synth_bedrock.resources("AWS::Lambda::Version")
    assert {v["Properties"]["FunctionName"]["Ref"] for v in versions.values()} == {
        keys["api"],
        keys["context"],
    }
    assert {v.get("DeletionPolicy") for v in versions.values()} == {"Delete"}, (
        "a replaced snapshot stops billing"
    )


def test_given_snap_start_then_api_gateway_invokes_the_live_aliases_only(synth_bedrock: Synth) -> None:
    aliases = list(synth_bedrock.resources("AWS::Lambda::Alias"))
    uris = integration_uris(synth_bedrock)
    assert all(alias in uris for alias in aliases), "every route goes to an alias"
    permissions = synth_bedrock.resources("AWS::Lambda::Permission").values()
    invoked = json.dumps(
        [p["Properties"]["FunctionName"] for p in permissions if "apigateway" in p["Properties"]["Principal"]]
    )
    keys = memstack_function_keys(synth_bedrock)
    assert all(alias in invoked for alias in aliases)
    assert f'{{"Fn::GetAtt": ["{keys["api"]}", "Arn"]}}' not in invoked, (
        "the unpublished function is not invoked"
    )
    assert not synth_bedrock.nag_errors and not synth_bedrock.nag_warnings


def test_given_snap_start_then_synth_leaves_no_warning_about_unpublished_versions(
    synth_bedrock: Synth,
) -> None:
    from aws_cdk.assertions import Annotations, Match

    warnings = Annotations.from_stack(synth_bedrock.stack).find_warning(
        "*", Match.string_like_regexp(".*SnapStart.*")
    )
    assert warnings == [], warnings


def test_given_snap_start_with_openai_then_only_the_functions_without_a_snapshot_have_the_secrets_extension() -> (
    None
):
    from tests.infra.conftest import synthesize

    synth = synthesize(snapStart="true")  # models=openai: the key secret

    resources = synth.json["Resources"]
    for name, key in memstack_function_keys(synth).items():
        variables = resources[key]["Properties"]["Environment"]["Variables"]
        if "MEMSTACK_OPENAI_API_KEY_SECRET_ARN" not in variables:
            continue  # the index set-up reads no key
        has_extension = "PARAMETERS_SECRETS_EXTENSION_HTTP_PORT" in variables
        # the snapshot is taken after the key is read (memstack.snapstart.prime): the extension gains nothing
        assert has_extension == (name not in ("api", "context")), name
    assert not synth.nag_errors

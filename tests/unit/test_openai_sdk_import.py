"""The OpenAI SDK imported through memstack.adapters.openai.sdk: the type packages' ``__init__`` files run on
first use only, and every name stays reachable (each case in a fresh interpreter, where ``openai`` is not
imported yet)."""

from __future__ import annotations

from tests.fresh_interpreter import run_fresh as run


def test_given_the_finder_when_a_client_is_built_then_the_response_types_are_not() -> None:
    out = run(
        """
        import sys
        from memstack.adapters.openai.connection import OpenAIConnection, default_sleep
        from memstack.adapters.openai.sdk import install
        install()  # as a deployed function's memory_from_env does
        connection = OpenAIConnection(
            api_key="k", base_url=None, timeout=5, max_retries=0, client=None, sleep=default_sleep
        )
        connection.client().embeddings
        print("openai.types.responses.response" in sys.modules, "openai.types.batch" in sys.modules)
        """
    )
    assert out == "False False", "building a client imported types the embeddings endpoint never uses"


def test_given_the_finder_then_every_re_exported_name_resolves_as_without_it() -> None:
    out = run(
        """
        from memstack.adapters.openai.sdk import install
        assert install()
        import openai
        from openai.types.chat import ChatCompletion, ChatCompletionMessageParam
        from openai.types.create_embedding_response import CreateEmbeddingResponse
        assert openai.types.CreateEmbeddingResponse is CreateEmbeddingResponse
        assert openai.types.chat.ChatCompletion is ChatCompletion
        assert ChatCompletion.__module__ == "openai.types.chat.chat_completion"
        assert openai.types.Batch.__module__ == "openai.types.batch"  # the package's own names, on use
        print("ok")
        """
    )
    assert out == "ok"


def test_given_openai_already_imported_then_install_changes_nothing() -> None:
    out = run(
        """
        import sys
        import openai
        from memstack.adapters.openai.sdk import install
        print(install(), any(type(f).__name__ == "DeferredInitFinder" for f in sys.meta_path))
        """
    )
    assert out == "False False"


def test_given_a_library_user_when_the_openai_client_is_built_then_the_sdk_imports_as_it_always_does() -> (
    None
):
    out = run(
        """
        import sys
        from memstack.adapters.openai.connection import OpenAIConnection, default_sleep
        OpenAIConnection(
            api_key="k", base_url=None, timeout=5, max_retries=0, client=None, sleep=default_sleep
        ).client()
        import openai.types
        finder = any(type(f).__name__ == "DeferredInitFinder" for f in sys.meta_path)
        print(finder, "Batch" in dir(openai.types))
        """
    )
    assert out == "False True", "the library changed how the host process imports openai"


def test_given_the_finder_when_the_embeddings_types_are_reached_then_the_types_package_init_is_not_run() -> (
    None
):
    out = run(
        """
        import sys
        from memstack.adapters.openai.sdk import install
        install()
        import openai
        from openai.types import CreateEmbeddingResponse
        print("Batch" in vars(openai.types), "openai.types.batch" in sys.modules, CreateEmbeddingResponse.__name__)
        """
    )
    assert out == "False False CreateEmbeddingResponse", (
        "a plain re-export ran the whole openai.types __init__"
    )


def test_given_the_finder_when_a_client_is_built_then_the_structured_output_helpers_are_not() -> None:
    out = run(
        """
        import sys
        from memstack.adapters.openai.connection import OpenAIConnection, default_sleep
        from memstack.adapters.openai.sdk import install
        install()
        connection = OpenAIConnection(
            api_key="k", base_url=None, timeout=5, max_retries=0, client=None, sleep=default_sleep
        )
        connection.client().embeddings
        print(
            "openai.lib._parsing._completions" in sys.modules,
            "openai.types.chat.chat_completion" in sys.modules,
        )
        """
    )
    assert out == "False False", "openai.lib's __init__ (structured-output parsing) ran for embeddings"


def test_given_the_finder_when_the_chat_endpoint_is_reached_then_its_parsing_helpers_load() -> None:
    out = run(
        """
        from memstack.adapters.openai.sdk import install
        install()
        import openai
        client = openai.OpenAI(api_key="k", max_retries=0)
        client.chat.completions
        from openai.lib import _parsing, pydantic_function_tool
        from openai.lib._parsing._completions import type_to_response_format_param
        assert _parsing.type_to_response_format_param is type_to_response_format_param
        assert pydantic_function_tool.__module__ == "openai.lib._tools"
        print("ok")
        """
    )
    assert out == "ok"


def test_given_the_finder_when_a_client_is_built_then_the_sdk_package_init_and_its_other_clients_wait() -> (
    None
):
    out = run(
        """
        import sys
        from memstack.adapters.openai.connection import OpenAIConnection, default_sleep
        from memstack.adapters.openai.sdk import install
        install()
        connection = OpenAIConnection(
            api_key="k", base_url=None, timeout=5, max_retries=0, client=None, sleep=default_sleep
        )
        connection.client().embeddings
        waiting = [m for m in ("openai.lib.azure", "openai.providers.bedrock", "openai._module_client")
                   if m not in sys.modules]
        import openai
        assert openai.AzureOpenAI.__name__ == "AzureOpenAI"  # a re-export: its module alone
        assert openai.api_key is None  # the package's own name: its __init__ runs
        assert openai.APIStatusError.__module__ == "openai"  # as eagerly, once it has run
        print(waiting)
        """
    )
    assert out == "['openai.lib.azure', 'openai.providers.bedrock', 'openai._module_client']", (
        "building the client ran openai/__init__.py (the Azure, Bedrock and module-level clients)"
    )

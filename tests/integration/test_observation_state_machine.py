"""The observation state machine, run: its definition taken from the synthesized template (infra/observation.py),
created and executed in moto's Step Functions, whose Lambda calls run our handlers (functions/observe,
functions/reflect) in-process instead of in Docker.

The seam: moto's Step Functions interpreter invokes Lambda through boto3, which reaches
``moto.awslambda.models.LambdaFunction.invoke``; the test replaces that method with one that calls the
handler and answers like the Lambda runtime (``X-Amz-Function-Error`` and ``{"errorMessage",
"errorType", "stackTrace"}`` for an uncaught exception, whose class name becomes the error name).
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import sys
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from memstack.adapters.stepfunctions import StepFunctionsScheduler
from memstack.adapters.testing import ChatCall, ScriptedChatModel
from memstack.errors import InvalidInput, Unavailable
from memstack.observation.engine import ObserveResult, ReflectResult
from memstack.ports import ObservationJob

ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # infra/ is not an installed package
pytest.importorskip("aws_cdk", reason="the infra extra is not installed (pip install -e '.[infra]')")

REGION = "us-east-1"
ACCOUNT = "123456789012"
NAMES = {"observe": "memstack-observe", "reflect": "memstack-reflect"}


def load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"{name}_app", ROOT / "functions" / name / "app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_definition_cache: dict[str, Any] = {}


def synthesized() -> tuple[dict[str, Any], dict[str, str]]:
    """The template of a stack holding the ``Observation`` construct, and logical id → function name."""
    if not _definition_cache:
        from aws_cdk import App, CfnElement, Stack
        from aws_cdk import aws_lambda as lambda_
        from aws_cdk.assertions import Template
        from infra.observation import Observation

        app = App()
        stack = Stack(app, "ObservationRun")
        code = lambda_.Code.from_inline("def handler(event, context):\n    return {}\n")
        functions = {
            name: lambda_.Function(
                stack, name.title(), runtime=lambda_.Runtime.PYTHON_3_12, handler="index.handler", code=code
            )
            for name in ("observe", "reflect", "sweep")
        }
        Observation(
            stack,
            "Observation",
            observe_function=functions["observe"],
            reflect_function=functions["reflect"],
            sweep_function=functions["sweep"],
            starters=[],
        )
        ids = {}
        for name, function in functions.items():
            child = function.node.default_child
            assert isinstance(child, CfnElement)
            ids[stack.get_logical_id(child)] = name
        _definition_cache["template"] = Template.from_stack(stack).to_json()
        _definition_cache["ids"] = ids
    return _definition_cache["template"], _definition_cache["ids"]


def definition_for_moto() -> str:
    from tests.infra.intrinsics import state_machine_definition

    template, ids = synthesized()

    def lookup(logical: str, attribute: str | None) -> str:
        assert logical in ids and attribute == "Arn", (logical, attribute)
        return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{NAMES[ids[logical]]}"

    return json.dumps(state_machine_definition(template, lookup))


# the handlers' memory ---------------------------------------------------------------------------------


@dataclass
class FakeMemory:
    """Records what the handlers ask of ``Memory``; ``observe_errors``/``reflect_errors`` are raised first,
    in order, by the next calls."""

    should_reflect: bool = False
    observe_errors: list[Exception] = field(default_factory=list)
    reflect_errors: list[Exception] = field(default_factory=list)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def observe(
        self,
        *,
        resource_id: str,
        thread_id: str,
        reason: str = "background",
        time_budget: float | None = None,
    ) -> ObserveResult:
        with self.lock:
            self.calls.append(
                ("observe", {"resource_id": resource_id, "thread_id": thread_id, "reason": reason})
            )
            error = self.observe_errors.pop(0) if self.observe_errors else None
        if error is not None:
            raise error
        return ObserveResult(should_reflect=self.should_reflect, observed_messages=3, observation_tokens=42)

    def reflect(self, *, resource_id: str, thread_id: str) -> ReflectResult:
        with self.lock:
            self.calls.append(("reflect", {"resource_id": resource_id, "thread_id": thread_id}))
            error = self.reflect_errors.pop(0) if self.reflect_errors else None
        if error is not None:
            raise error
        return ReflectResult(reflected=True, level=1, tokens_before=42, tokens_after=20, generation_count=1)

    def record_observation_failure(self, *, resource_id: str, thread_id: str, error: str) -> None:
        with self.lock:
            self.calls.append(
                ("record_failure", {"resource_id": resource_id, "thread_id": thread_id, "error": error})
            )

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.calls]


@dataclass
class Run:
    """The moto world: the state machine's ARN, the Step Functions client, and the handlers' memory."""

    arn: str
    sfn: Any
    use: Callable[[Any], None]

    def start(self, job: ObservationJob) -> dict[str, Any]:
        StepFunctionsScheduler(self.arn, region=REGION).submit(job)
        execution_arn = f"{self.arn.replace(':stateMachine:', ':execution:')}:{job.key}"
        return self.wait(execution_arn)

    def wait(self, execution_arn: str, timeout: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            described: dict[str, Any] = self.sfn.describe_execution(executionArn=execution_arn)
            if described["status"] != "RUNNING":
                return described
            if time.monotonic() > deadline:
                raise AssertionError(f"execution still running after {timeout} s")
            time.sleep(0.05)


@pytest.fixture
def run(monkeypatch: pytest.MonkeyPatch) -> Iterator[Run]:
    import boto3
    import moto
    from moto.awslambda.models import LambdaFunction

    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "MOTO_ACCOUNT_ID": ACCOUNT,
    }.items():
        monkeypatch.setenv(name, value)
    observe_app, reflect_app = load("observe"), load("reflect")
    handlers = {NAMES["observe"]: observe_app.handler, NAMES["reflect"]: reflect_app.handler}

    def invoke(self: Any, body: str, request_headers: Any, response_headers: Any) -> bytes:
        event = json.loads(body) if body else {}
        try:
            answer = handlers[self.function_name](event, None)
        except Exception as exc:  # as the Lambda runtime reports an uncaught exception
            response_headers["x-amz-function-error"] = "Unhandled"
            error = {"errorMessage": str(exc), "errorType": type(exc).__name__, "stackTrace": ["..."]}
            return json.dumps(error).encode()
        return json.dumps(answer).encode()

    monkeypatch.setattr(LambdaFunction, "invoke", invoke)

    def use(memory: Any) -> None:
        for module in (observe_app, reflect_app):
            monkeypatch.setattr(module, "memory_from_env", lambda: memory)

    definition = definition_for_moto()
    with moto.mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        iam = boto3.client("iam")
        role = iam.create_role(
            RoleName="observation",
            AssumeRolePolicyDocument=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": ["lambda.amazonaws.com", "states.amazonaws.com"]},
                            "Action": "sts:AssumeRole",
                        }
                    ],
                }
            ),
        )["Role"]["Arn"]
        archive = io.BytesIO()
        with zipfile.ZipFile(archive, "w") as z:
            z.writestr("app.py", "def handler(event, context):\n    return {}\n")
        lam = boto3.client("lambda")
        for name in NAMES.values():
            lam.create_function(
                FunctionName=name,
                Runtime="python3.12",
                Role=role,
                Handler="app.handler",
                Code={"ZipFile": archive.getvalue()},
            )
        sfn = boto3.client("stepfunctions")
        arn = sfn.create_state_machine(name="observation", definition=definition, roleArn=role)[
            "stateMachineArn"
        ]
        yield Run(arn=arn, sfn=sfn, use=use)


def job(key: str = "om-0123456789abcdef01234567-v1-s4-threshold") -> ObservationJob:
    return ObservationJob(resource_id="r1", thread_id="t1", key=key, reason="threshold")


# the executions ---------------------------------------------------------------------------------------


def test_given_observe_says_reflect_when_executed_then_reflect_runs_and_the_execution_succeeds(
    run: Run,
) -> None:
    memory = FakeMemory(should_reflect=True)
    run.use(memory)
    described = run.start(job())
    assert described["status"] == "SUCCEEDED", described
    assert memory.calls == [
        ("observe", {"resource_id": "r1", "thread_id": "t1", "reason": "threshold"}),
        ("reflect", {"resource_id": "r1", "thread_id": "t1"}),
    ]
    output = json.loads(described["output"])
    assert output["observe"]["should_reflect"] is True and output["observe"]["observed_messages"] == 3
    assert output["reflect"]["reflected"] is True
    assert output["key"] == job().key  # the ids ride along; no text anywhere


def test_given_nothing_to_reflect_when_executed_then_reflect_is_skipped(run: Run) -> None:
    memory = FakeMemory(should_reflect=False)
    run.use(memory)
    described = run.start(job())
    assert described["status"] == "SUCCEEDED", described
    assert memory.kinds() == ["observe"]


def test_given_a_throttled_first_attempt_when_executed_then_it_is_retried_and_succeeds(run: Run) -> None:
    memory = FakeMemory(observe_errors=[Unavailable("the model throttled (HTTP 429); retry later")])
    run.use(memory)
    described = run.start(job())
    assert described["status"] == "SUCCEEDED", described
    assert memory.kinds() == ["observe", "observe"]


def test_given_a_permanent_failure_when_executed_then_it_is_recorded_and_the_execution_fails(
    run: Run,
) -> None:
    memory = FakeMemory(
        should_reflect=True, reflect_errors=[InvalidInput("thread_id is malformed", field="thread_id")]
    )
    run.use(memory)
    described = run.start(job())
    assert described["status"] == "FAILED", described
    assert memory.kinds() == ["observe", "reflect", "record_failure"]  # InvalidInput is not retried
    recorded = memory.calls[-1][1]
    assert recorded["resource_id"] == "r1" and recorded["thread_id"] == "t1"
    assert recorded["error"] == "InvalidInput: thread_id is malformed (field: thread_id)"
    history = run.sfn.get_execution_history(executionArn=described["executionArn"])["events"]
    failed = [e for e in history if e["type"] == "ExecutionFailed"]
    assert failed and failed[0]["executionFailedEventDetails"]["error"] == "ObservationFailed"


def test_given_the_same_job_twice_when_submitted_then_one_execution_runs(run: Run) -> None:
    memory = FakeMemory()
    run.use(memory)
    scheduler = StepFunctionsScheduler(run.arn, region=REGION)
    scheduler.submit(job())
    scheduler.submit(job())
    executions = run.sfn.list_executions(stateMachineArn=run.arn)["executions"]
    assert [e["name"] for e in executions] == [job().key]
    run.wait(executions[0]["executionArn"])
    scheduler.submit(job())  # after it finished: still not started again
    assert len(run.sfn.list_executions(stateMachineArn=run.arn)["executions"]) == 1
    assert memory.kinds() == ["observe"]


# end to end, with a real local Memory ----------------------------------------------------------------


def fixed_answer(call: ChatCall) -> str:
    """Every Observer call gets the same observations, every Reflector call a shorter log."""
    if call.kind == "reflector":
        return "<observations>\nDate: May 8, 2023\n* 🔴 (12:00) User's dog is Biscuit\n</observations>"
    lines = "\n".join(
        f"* 🟡 (12:0{i}) User talked about the beach trip with Biscuit, part {i}" for i in range(8)
    )
    return f"<observations>\nDate: May 8, 2023\n* 🔴 (12:00) User has a dog named Biscuit\n{lines}\n</observations>"


def test_given_a_real_memory_when_a_save_crosses_the_threshold_then_the_state_machine_observes_and_reflects(
    run: Run, tmp_path: Path
) -> None:
    from memstack.adapters.sqlite.db import SqliteDatabase
    from memstack.adapters.sqlite.index import SqliteSearchIndex
    from memstack.adapters.sqlite.store import SqliteMemoryStore
    from memstack.adapters.testing import HashEmbedder
    from memstack.memory import Memory
    from memstack.tokens import default_tokenizer

    chat = ScriptedChatModel(respond=fixed_answer)
    db = SqliteDatabase(tmp_path / "memory.db")
    embedder = HashEmbedder()
    memory = Memory(
        store=SqliteMemoryStore(db),
        index=SqliteSearchIndex(db, embedder.dimension),
        embedder=embedder,
        tokenizer=default_tokenizer(),
        options={
            "semantic_recall": False,
            "observational_memory": {
                "observation": {"message_tokens": 40, "buffer_tokens": False},
                "reflection": {"observation_tokens": 60},
            },
        },
        chat_model=chat,
        scheduler=StepFunctionsScheduler(run.arn, region=REGION),
    )
    run.use(memory)
    try:
        memory.create_thread(thread_id="t1", resource_id="r1")
        memory.save_messages(
            thread_id="t1",
            resource_id="r1",
            messages=[
                {
                    "role": "user",
                    "content": "My dog Biscuit and I went to the beach last weekend, it was sunny.",
                },
                {
                    "role": "assistant",
                    "content": "That sounds lovely! Does Biscuit like swimming in the sea?",
                },
                {"role": "user", "content": "He loves it, he chased the waves for an hour and then slept."},
            ],
        )
        executions = run.sfn.list_executions(stateMachineArn=run.arn)["executions"]
        assert len(executions) == 1, "the save scheduled one job through Step Functions"
        described = run.wait(executions[0]["executionArn"])
        assert described["status"] == "SUCCEEDED", described
        output = json.loads(described["output"])
        assert output["observe"]["observed_messages"] == 3
        assert output["observe"]["should_reflect"] is True
        assert output["reflect"]["reflected"] is True
        assert [call.kind for call in chat.calls] == ["observer", "reflector"]
        record = memory.store.get_observation_record("r1", "t1")
        assert record is not None and record.generation_count == 1
        assert "Biscuit" in record.active_observations
    finally:
        memory.close()


def test_given_huge_observer_answers_and_a_failing_reflector_when_saves_run_through_step_functions_then_no_record_gets_stuck(
    run: Run, tmp_path: Path
) -> None:
    from tests.observation_support import huge_answers, om_memory

    capped = {
        "observation": {"message_tokens": 1_000, "buffer_tokens": False},
        "reflection": {"observation_tokens": 4_000},
    }
    chat = huge_answers(2_000)  # ~330 KB an answer, a Reflector that only loops
    memory = om_memory(
        chat,
        scheduler=StepFunctionsScheduler(run.arn, region=REGION),
        path=str(tmp_path / "memory.db"),
        observational_memory=capped,
    )
    run.use(memory)
    try:
        memory.create_thread(thread_id="t1", resource_id="r1")
        for start in range(0, 240, 40):  # six saves of ~1,100 tokens: each starts an observation
            memory.save_messages(
                thread_id="t1",
                resource_id="r1",
                messages=[
                    {
                        "id": f"m{i}",
                        "role": "user" if i % 2 else "assistant",
                        "content": f"Message {i}: we talked about the garden and train number {i} today.",
                    }
                    for i in range(start, start + 40)
                ],
            )
            for execution in run.sfn.list_executions(stateMachineArn=run.arn)["executions"]:
                described = run.wait(execution["executionArn"])
                assert "PayloadTooLarge" not in json.dumps(described, default=str), described
        record = memory.store.get_observation_record("r1", "t1")
        assert record is not None and record.observed_seq("t1") >= 200, "observation kept moving"
        thresholds = memory.observation.thresholds(memory.options.observational_memory, record)
        assert (
            record.observation_tokens
            <= thresholds.reflection_block_after + thresholds.observation_tokens // 2
        )
        assert f"Key fact {chat.count('observer')}:" in record.active_observations
    finally:
        memory.close()

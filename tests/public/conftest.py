"""`pytest tests/public` on its own: these tests run through the grader, which gives them the `student` fixture
(your module, imported in a separate, restricted process). Without it every test would fail with "fixture
'student' not found"; say instead what to run. No import of the grader here: plain pytest may not find it."""
import pytest

GRADER_PLUGIN = "grader.engine.plugin"
HOW = ("these tests run through the grader: use `make check` (or `make check STAGE=a02`), or "
       ".venv/bin/python -m grader check a02_softmax\n"
       "이 테스트는 채점기로 실행합니다: `make check`(또는 `make check STAGE=a02`)나 "
       ".venv/bin/python -m grader check a02_softmax를 쓰세요")


def pytest_collection_modifyitems(session, config, items):
    if not config.pluginmanager.hasplugin(GRADER_PLUGIN):
        raise pytest.UsageError(HOW)

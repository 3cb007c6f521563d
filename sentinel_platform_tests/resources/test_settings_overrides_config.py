"""The settings resource never carries a password in its overrides.

``SettingsResource.overrides`` (which every asset, check, sensor and resource reads its
settings through) are free-form settings in resource
config, which the Dagster UI lists and every run stores; a secret setting (``redis_url``,
``alert_webhook_url``, ``analyzer_url``, ``analyzer_api_key``: a key is all secret)
carrying a password there is refused by the same
rule as the publisher's ``redis_url``, without ever quoting the value. Checked on the
resources themselves, on what the UI reads (GraphQL over a code location loaded out of
process) and on a run whose run config carries the password.
"""

import json
from pathlib import Path

import dagster as dg
import pytest
import redis

from sentinel_platform.redis_server import RedisServer
from sentinel_platform.resources.config_secrets import PasswordInConfigError
from sentinel_platform.resources.settings import SettingsResource
from sentinel_platform_tests.harness.secret_config import (
    PROBE_KEY,
    SECRET,
    failed_run_text,
    load_error_messages,
    password_url,
    probe_marker,
    query_locations,
    write_workspace,
)

RESOURCES = {"SettingsResource": SettingsResource}
#: (override key, value carrying SECRET, the variable the error points to).
SECRET_OVERRIDES = {
    "redis_url-userinfo": ("redis_url", f"redis://app:{SECRET}@127.0.0.1:6399/0", "REDIS_URL"),
    "redis_url-query": ("redis_url", f"redis://127.0.0.1:6399/0?password={SECRET}", "REDIS_URL"),
    "REDIS_URL-alias": ("REDIS_URL", f"redis://:{SECRET}@127.0.0.1:6399/0", "REDIS_URL"),
    "cluster": ("redis_url", f"redis+cluster://app:{SECRET}@127.0.0.1:7000", "REDIS_URL"),
    "webhook-userinfo": (
        "alert_webhook_url",
        f"https://hook:{SECRET}@alerts.example/hook",
        "SENTINEL_ALERT_WEBHOOK_URL",
    ),
    "webhook-token": (
        "alert_webhook_url",
        f"https://alerts.example/hook?token={SECRET}",
        "SENTINEL_ALERT_WEBHOOK_URL",
    ),
    "analyzer": ("analyzer_url", f"http://u:{SECRET}@127.0.0.1:9/", "SENTINEL_ANALYZER_URL"),
    # a model API's key is no URL: all of it is the secret
    "analyzer-key": ("analyzer_api_key", f"sk-{SECRET}", "SENTINEL_ANALYZER_API_KEY"),
}
PROBE_LOCATION = """
import dagster as dg

from sentinel_platform.resources.settings import SettingsResource

# Apart from the line that fails, as in a config module: a traceback quotes that line.
OVERRIDES = {{{key!r}: {value!r}}}


@dg.asset
def probe(resource: {resource}) -> None:
    resource.load()


defs = dg.Definitions(assets=[probe], resources={{"resource": {resource}(overrides=OVERRIDES)}})
"""


@dg.asset(required_resource_keys={"probe_resource"})
def probe(context: dg.AssetExecutionContext) -> None:
    """Writes a marker with whatever Redis the resource's settings name."""
    settings = context.resources.probe_resource.load()
    with redis.Redis.from_url(settings.redis_url_value) as client:
        client.set(PROBE_KEY, "reached")


@pytest.mark.parametrize("resource", RESOURCES)
@pytest.mark.parametrize("case", SECRET_OVERRIDES)
def test_a_password_in_the_overrides_is_refused_without_showing_it(
    resource: str, case: str
) -> None:
    key, value, env_var = SECRET_OVERRIDES[case]
    with pytest.raises(PasswordInConfigError) as caught:
        RESOURCES[resource](overrides={"lag_warn": "5", key: value})
    message = str(caught.value)
    assert f"{resource}.overrides[{key!r}]" in message
    assert env_var in message
    assert SECRET not in f"{caught.value!r} {caught.value}"
    assert caught.value.__cause__ is None and caught.value.__context__ is None


@pytest.mark.parametrize("resource", RESOURCES)
@pytest.mark.parametrize(
    "overrides",
    [
        {"redis_url": "redis://127.0.0.1:6399/0", "lag_warn": "5"},
        {"redis_url": "redis://app@127.0.0.1:6399/3"},
        {"alert_webhook_url": "http://127.0.0.1:8080/hook", "alert_cooldown_s": "0"},
        {},
    ],
)
def test_overrides_without_a_password_are_accepted(
    resource: str, overrides: dict[str, str]
) -> None:
    assert RESOURCES[resource](overrides=overrides).overrides == overrides


def test_a_location_putting_a_password_in_the_overrides_fails_to_load_naming_the_field(
    settings_env: dict[str, str], tmp_path: Path
) -> None:
    cases = {
        f"{resource}-{case}": (resource, *SECRET_OVERRIDES[case])
        for resource in RESOURCES
        for case in ("redis_url-userinfo", "webhook-token")
    }
    workspace = write_workspace(
        tmp_path,
        {
            name: PROBE_LOCATION.format(resource=resource, key=key, value=value)
            for name, (resource, key, value, _env_var) in cases.items()
        },
    )

    with dg.instance_for_test() as instance:
        shown = query_locations(workspace, instance)

    assert SECRET not in json.dumps(shown)
    assert sorted(shown) == sorted(cases)
    for name, location in shown.items():
        resource, key, _value, env_var = cases[name]
        assert location["load"]["__typename"] == "PythonError", (name, location)
        messages = load_error_messages(location)
        field = f"{resource}.overrides[{key!r}]"
        assert any(field in m and env_var in m for m in messages), (name, messages)


@pytest.mark.parametrize("resource", RESOURCES)
def test_a_run_with_the_password_in_its_overrides_run_config_fails_before_connecting(
    resource: str,
    password_redis: RedisServer,
    dagster_instance: dg.DagsterInstance,
) -> None:
    overrides = {"redis_url": password_url(password_redis)}
    shown = failed_run_text(
        dagster_instance,
        [probe],
        {"probe_resource": RESOURCES[resource]()},
        {"resources": {"probe_resource": {"config": {"overrides": overrides}}}},
    )
    assert "overrides['redis_url']" in shown and "REDIS_URL" in shown
    assert SECRET not in shown
    assert probe_marker(password_redis) is None

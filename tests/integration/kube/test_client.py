from __future__ import annotations

import pytest

from ascheduler.kube import ApiError, KubeClient
from ascheduler.metrics import REST_CLIENT_REQUESTS


def count(kube: KubeClient, method: str, code: str) -> float:
    host = kube.server.split("://", 1)[-1]
    return REST_CLIENT_REQUESTS.labels(code=code, method=method, host=host)._value.get()


async def test_requests_are_counted_by_method_and_code(kube: KubeClient, namespace: str) -> None:
    gets, missing, posts = (
        count(kube, "GET", "200"),
        count(kube, "GET", "404"),
        count(kube, "POST", "201"),
    )
    await kube.get(f"/api/v1/namespaces/{namespace}/pods")
    with pytest.raises(ApiError):
        await kube.get(f"/api/v1/namespaces/{namespace}/pods/none")
    await kube.post(
        f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {"name": "c"}, "data": {}}
    )
    assert count(kube, "GET", "200") == gets + 1
    assert count(kube, "GET", "404") == missing + 1
    assert count(kube, "POST", "201") == posts + 1

"""DescribeAcls, CreateAcls and DeleteAcls at a broker (wire/api/acls.py): Kafka's
AclAuthorizer's admin side, over the bindings in ZooKeeper that `keel acl` also writes. Each
change goes through `ZkAclStore.update_acls` (read-modify-write with the change notification
in the same multi-op), so every broker's authorizer sees it as it sees `keel acl`'s."""

from __future__ import annotations

import logging

from actors.security.acl import (
    AclEntry,
    AclError,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    check_principal,
)
from node.zk.acl_store import ZkAclStore
from wire.api import (
    AclCreation,
    AclCreationResult,
    AclDescription,
    AclFilter,
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsFilterResult,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DeletedAcl,
    DescribeAclsRequest,
    DescribeAclsResource,
    DescribeAclsResponse,
    Request,
    Response,
)
from wire.api.acls import ANY, MATCH
from wire.errors import ErrorCode

log = logging.getLogger(__name__)

_WILDCARD = "*"


def _pattern_matches(wanted: AclFilter, pattern: ResourcePattern) -> bool:
    if wanted.resource_type_filter not in (ANY, pattern.resource_type.value):
        return False
    name = wanted.resource_name_filter
    if wanted.pattern_type_filter == MATCH:
        # The bindings that apply to that literal name: itself, `*`, and prefixes of it.
        if name is None:
            return True
        if pattern.pattern_type is PatternType.LITERAL:
            return pattern.name in (name, _WILDCARD)
        return name.startswith(pattern.name)
    if wanted.pattern_type_filter not in (ANY, pattern.pattern_type.value):
        return False
    return name is None or name == pattern.name


def _entry_matches(wanted: AclFilter, entry: AclEntry) -> bool:
    return (
        wanted.principal_filter in (None, entry.principal)
        and wanted.host_filter in (None, entry.host)
        and wanted.operation in (ANY, entry.operation.value)
        and wanted.permission_type in (ANY, entry.permission.value)
    )


def _binding(creation: AclCreation) -> tuple[ResourcePattern, AclEntry]:
    """Kafka's checks of a new binding (AclBinding's and the authorizer's); AclError if bad."""
    try:
        pattern = ResourcePattern(
            ResourceType(creation.resource_type),
            creation.resource_name,
            PatternType(creation.resource_pattern_type),
        )
        entry = AclEntry(
            check_principal(creation.principal),
            creation.host,
            AclOperation(creation.operation),
            AclPermissionType(creation.permission_type),
        )
    except ValueError as e:
        raise AclError(f"not a binding Kafka can hold: {e}") from None
    if not pattern.name:
        raise AclError("the resource name is empty")
    return pattern, entry


class AclApis:
    def __init__(self, store: ZkAclStore, *, enabled: bool) -> None:
        self._store = store
        self._enabled = enabled

    async def handle(self, body: Request) -> Response | None:
        match body:
            case DescribeAclsRequest():
                if not self._enabled:
                    return DescribeAclsResponse(
                        error_code=ErrorCode.SECURITY_DISABLED, error_message=_DISABLED
                    )
                return await self._describe(body)
            case CreateAclsRequest():
                if not self._enabled:
                    refused = AclCreationResult(
                        error_code=ErrorCode.SECURITY_DISABLED, error_message=_DISABLED
                    )
                    return CreateAclsResponse(results=[refused] * len(body.creations))
                return await self._create(body)
            case DeleteAclsRequest():
                if not self._enabled:
                    gone = DeleteAclsFilterResult(
                        error_code=ErrorCode.SECURITY_DISABLED, error_message=_DISABLED
                    )
                    return DeleteAclsResponse(filter_results=[gone] * len(body.filters))
                return await self._delete(body)
        return None

    async def _describe(self, body: DescribeAclsRequest) -> DescribeAclsResponse:
        stored = await self._store.all_acls()
        resources = []
        for pattern, entries in sorted(stored.items()):
            if not _pattern_matches(body, pattern):
                continue
            matching = sorted((e for e in entries if _entry_matches(body, e)), key=str)
            if matching:
                resources.append(
                    DescribeAclsResource(
                        resource_type=pattern.resource_type.value,
                        resource_name=pattern.name,
                        pattern_type=pattern.pattern_type.value,
                        acls=[
                            AclDescription(
                                principal=e.principal,
                                host=e.host,
                                operation=e.operation.value,
                                permission_type=e.permission.value,
                            )
                            for e in matching
                        ],
                    )
                )
        return DescribeAclsResponse(resources=resources)

    async def _create(self, body: CreateAclsRequest) -> CreateAclsResponse:
        results = []
        for creation in body.creations:
            try:
                pattern, entry = _binding(creation)
                await self._store.update_acls(pattern, lambda current, e=entry: current | {e})  # type: ignore[misc]
            except AclError as e:
                results.append(AclCreationResult(error_code=ErrorCode.INVALID_REQUEST, error_message=str(e)))
                continue
            log.info("ACL added for %s: %s", pattern, entry)
            results.append(AclCreationResult())
        return CreateAclsResponse(results=results)

    async def _delete(self, body: DeleteAclsRequest) -> DeleteAclsResponse:
        stored = await self._store.all_acls()
        results = []
        for wanted in body.filters:
            deleted = []
            for pattern in sorted(p for p in stored if _pattern_matches(wanted, p)):
                doomed = frozenset(e for e in stored[pattern] if _entry_matches(wanted, e))
                if not doomed:
                    continue
                await self._store.update_acls(pattern, lambda current, d=doomed: current - d)  # type: ignore[misc]
                log.info("ACLs removed for %s: %d", pattern, len(doomed))
                deleted += [
                    DeletedAcl(
                        resource_type=pattern.resource_type.value,
                        resource_name=pattern.name,
                        pattern_type=pattern.pattern_type.value,
                        principal=e.principal,
                        host=e.host,
                        operation=e.operation.value,
                        permission_type=e.permission.value,
                    )
                    for e in sorted(doomed, key=str)
                ]
            results.append(DeleteAclsFilterResult(matching_acls=deleted))
        return DeleteAclsResponse(filter_results=results)


_DISABLED = "no authorizer is configured on the broker (authorizer.class.name)"

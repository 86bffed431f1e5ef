"""The ACL APIs: DescribeAcls (29), CreateAcls (30), DeleteAcls (31), as Kafka's brokers serve
them with an authorizer: the bindings live in ZooKeeper under `/kafka-acl` (what `keel acl`
and Kafka's `kafka-acls --authorizer-properties zookeeper.connect=...` write), and every
change is announced under `/kafka-acl-changes` for the brokers' authorizers.

Filters take Kafka's codes: resource type and pattern type 1 ANY (pattern type 2 MATCH: the
literal name, `*` and the prefixes that match it), operation and permission 1 ANY, a null
name, principal or host any. Without `authorizer.class.name` each is answered
SECURITY_DISABLED (54), as Kafka does. Describe needs Describe on the cluster, create and
delete Alter on it.
"""

from __future__ import annotations

import dataclasses

from wire.api.base import Request, Response
from wire.api.keys import ApiKey
from wire.schema import Struct

ANY = 1
MATCH = 2


@dataclasses.dataclass(frozen=True, kw_only=True)
class AclFilter(Struct):
    resource_type_filter: int = ANY
    resource_name_filter: str | None = None
    pattern_type_filter: int = 3  # LITERAL: version 0 has no pattern types
    principal_filter: str | None = None
    host_filter: str | None = None
    operation: int = ANY
    permission_type: int = ANY


@dataclasses.dataclass(frozen=True, kw_only=True)
class DescribeAclsRequest(AclFilter, Request):
    API_KEY = ApiKey.DESCRIBE_ACLS


@dataclasses.dataclass(frozen=True, kw_only=True)
class AclDescription(Struct):
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class DescribeAclsResource(Struct):
    resource_type: int
    resource_name: str
    pattern_type: int
    acls: list[AclDescription] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DescribeAclsResponse(Response):
    resources: list[DescribeAclsResource] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class AclCreation(Struct):
    resource_type: int
    resource_name: str
    resource_pattern_type: int = 3
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class CreateAclsRequest(Request):
    API_KEY = ApiKey.CREATE_ACLS

    creations: list[AclCreation] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class AclCreationResult(Struct):
    error_code: int = 0
    error_message: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class CreateAclsResponse(Response):
    results: list[AclCreationResult] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DeleteAclsRequest(Request):
    API_KEY = ApiKey.DELETE_ACLS

    filters: list[AclFilter] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DeletedAcl(Struct):
    error_code: int = 0
    error_message: str | None = None
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class DeleteAclsFilterResult(Struct):
    error_code: int = 0
    error_message: str | None = None
    matching_acls: list[DeletedAcl] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DeleteAclsResponse(Response):
    filter_results: list[DeleteAclsFilterResult] = dataclasses.field(default_factory=list)

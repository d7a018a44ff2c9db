from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

CONFLICT_REASON_ANNOTATIONS_CONFLICT: ConflictReason
CONFLICT_REASON_INTERNAL_TRAFFIC_POLICY_CONFLICT: ConflictReason
CONFLICT_REASON_IP_FAMILY_CONFLICT: ConflictReason
CONFLICT_REASON_LABELS_CONFLICT: ConflictReason
CONFLICT_REASON_LOCALITY_CONFLICT: ConflictReason
CONFLICT_REASON_PORT_CONFLICT: ConflictReason
CONFLICT_REASON_SESSION_AFFINITY_CONFIG_CONFLICT: ConflictReason
CONFLICT_REASON_SESSION_AFFINITY_CONFLICT: ConflictReason
CONFLICT_REASON_TRAFFIC_DISTRIBUTION_CONFLICT: ConflictReason
CONFLICT_REASON_TYPE_CONFLICT: ConflictReason
CONFLICT_REASON_UNSPECIFIED: ConflictReason
DESCRIPTOR: _descriptor.FileDescriptor
ERROR_REASON_CLUSTERSET_UNKNOWN: ErrorReason
ERROR_REASON_UNSPECIFIED: ErrorReason
LEASE_STATE_ACTIVE: LeaseState
LEASE_STATE_EXPIRED: LeaseState
LEASE_STATE_HELD_REPLICATION: LeaseState
LEASE_STATE_UNSPECIFIED: LeaseState
LOCALITY_TIER_ANY: LocalityTier
LOCALITY_TIER_CLUSTER: LocalityTier
LOCALITY_TIER_REGION: LocalityTier
LOCALITY_TIER_UNSPECIFIED: LocalityTier
SERVICE_TYPE_CLUSTER_SET_IP: ServiceType
SERVICE_TYPE_HEADLESS: ServiceType
SERVICE_TYPE_UNSPECIFIED: ServiceType

class Cluster(_message.Message):
    __slots__ = ["cluster_id", "clusterset", "controller_version", "lease", "region", "register_time"]
    CLUSTERSET_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_VERSION_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    REGISTER_TIME_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    clusterset: str
    controller_version: str
    lease: Lease
    region: str
    register_time: _timestamp_pb2.Timestamp
    def __init__(self, clusterset: _Optional[str] = ..., cluster_id: _Optional[str] = ..., region: _Optional[str] = ..., lease: _Optional[_Union[Lease, _Mapping]] = ..., register_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., controller_version: _Optional[str] = ...) -> None: ...

class DeleteClusterRequest(_message.Message):
    __slots__ = ["cluster_id", "clusterset"]
    CLUSTERSET_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    clusterset: str
    def __init__(self, clusterset: _Optional[str] = ..., cluster_id: _Optional[str] = ...) -> None: ...

class DeleteClusterResponse(_message.Message):
    __slots__ = ["deleted_exports"]
    DELETED_EXPORTS_FIELD_NUMBER: _ClassVar[int]
    deleted_exports: int
    def __init__(self, deleted_exports: _Optional[int] = ...) -> None: ...

class DeleteExportRequest(_message.Message):
    __slots__ = ["cluster_id", "clusterset", "service"]
    CLUSTERSET_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    clusterset: str
    service: ServiceKey
    def __init__(self, clusterset: _Optional[str] = ..., cluster_id: _Optional[str] = ..., service: _Optional[_Union[ServiceKey, _Mapping]] = ...) -> None: ...

class DeleteExportResponse(_message.Message):
    __slots__ = ["deleted"]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: bool
    def __init__(self, deleted: bool = ...) -> None: ...

class Endpoint(_message.Message):
    __slots__ = ["addresses", "conditions", "hostname", "node_name", "target_pod", "zone"]
    ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    TARGET_POD_FIELD_NUMBER: _ClassVar[int]
    ZONE_FIELD_NUMBER: _ClassVar[int]
    addresses: _containers.RepeatedScalarFieldContainer[str]
    conditions: EndpointConditions
    hostname: str
    node_name: str
    target_pod: str
    zone: str
    def __init__(self, addresses: _Optional[_Iterable[str]] = ..., conditions: _Optional[_Union[EndpointConditions, _Mapping]] = ..., hostname: _Optional[str] = ..., zone: _Optional[str] = ..., node_name: _Optional[str] = ..., target_pod: _Optional[str] = ...) -> None: ...

class EndpointConditions(_message.Message):
    __slots__ = ["ready", "serving", "terminating"]
    READY_FIELD_NUMBER: _ClassVar[int]
    SERVING_FIELD_NUMBER: _ClassVar[int]
    TERMINATING_FIELD_NUMBER: _ClassVar[int]
    ready: bool
    serving: bool
    terminating: bool
    def __init__(self, ready: bool = ..., serving: bool = ..., terminating: bool = ...) -> None: ...

class EndpointGroup(_message.Message):
    __slots__ = ["address_type", "endpoints", "ports"]
    ADDRESS_TYPE_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    PORTS_FIELD_NUMBER: _ClassVar[int]
    address_type: str
    endpoints: _containers.RepeatedCompositeFieldContainer[Endpoint]
    ports: _containers.RepeatedCompositeFieldContainer[EndpointPort]
    def __init__(self, address_type: _Optional[str] = ..., ports: _Optional[_Iterable[_Union[EndpointPort, _Mapping]]] = ..., endpoints: _Optional[_Iterable[_Union[Endpoint, _Mapping]]] = ...) -> None: ...

class EndpointPort(_message.Message):
    __slots__ = ["app_protocol", "name", "port", "protocol"]
    APP_PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    app_protocol: str
    name: str
    port: int
    protocol: str
    def __init__(self, name: _Optional[str] = ..., protocol: _Optional[str] = ..., app_protocol: _Optional[str] = ..., port: _Optional[int] = ...) -> None: ...

class Export(_message.Message):
    __slots__ = ["cluster_id", "clusterset", "create_time", "endpoint_groups", "service", "spec", "update_time"]
    CLUSTERSET_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_GROUPS_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    clusterset: str
    create_time: _timestamp_pb2.Timestamp
    endpoint_groups: _containers.RepeatedCompositeFieldContainer[EndpointGroup]
    service: ServiceKey
    spec: ExportSpec
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, clusterset: _Optional[str] = ..., cluster_id: _Optional[str] = ..., service: _Optional[_Union[ServiceKey, _Mapping]] = ..., spec: _Optional[_Union[ExportSpec, _Mapping]] = ..., endpoint_groups: _Optional[_Iterable[_Union[EndpointGroup, _Mapping]]] = ..., create_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ExportContent(_message.Message):
    __slots__ = ["endpoint_groups", "service", "spec"]
    ENDPOINT_GROUPS_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    endpoint_groups: _containers.RepeatedCompositeFieldContainer[EndpointGroup]
    service: ServiceKey
    spec: ExportSpec
    def __init__(self, service: _Optional[_Union[ServiceKey, _Mapping]] = ..., spec: _Optional[_Union[ExportSpec, _Mapping]] = ..., endpoint_groups: _Optional[_Iterable[_Union[EndpointGroup, _Mapping]]] = ...) -> None: ...

class ExportResult(_message.Message):
    __slots__ = ["service", "verdict"]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    service: ServiceKey
    verdict: ExportVerdict
    def __init__(self, service: _Optional[_Union[ServiceKey, _Mapping]] = ..., verdict: _Optional[_Union[ExportVerdict, _Mapping]] = ...) -> None: ...

class ExportSpec(_message.Message):
    __slots__ = ["exported_annotations", "exported_labels", "internal_traffic_policy", "ip_families", "locality", "ports", "session_affinity", "session_affinity_config", "traffic_distribution", "type"]
    class ExportedAnnotationsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class ExportedLabelsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    EXPORTED_ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    EXPORTED_LABELS_FIELD_NUMBER: _ClassVar[int]
    INTERNAL_TRAFFIC_POLICY_FIELD_NUMBER: _ClassVar[int]
    IP_FAMILIES_FIELD_NUMBER: _ClassVar[int]
    LOCALITY_FIELD_NUMBER: _ClassVar[int]
    PORTS_FIELD_NUMBER: _ClassVar[int]
    SESSION_AFFINITY_CONFIG_FIELD_NUMBER: _ClassVar[int]
    SESSION_AFFINITY_FIELD_NUMBER: _ClassVar[int]
    TRAFFIC_DISTRIBUTION_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    exported_annotations: _containers.ScalarMap[str, str]
    exported_labels: _containers.ScalarMap[str, str]
    internal_traffic_policy: str
    ip_families: _containers.RepeatedScalarFieldContainer[str]
    locality: _containers.RepeatedScalarFieldContainer[LocalityTier]
    ports: _containers.RepeatedCompositeFieldContainer[ServicePort]
    session_affinity: str
    session_affinity_config: SessionAffinityConfig
    traffic_distribution: str
    type: ServiceType
    def __init__(self, ports: _Optional[_Iterable[_Union[ServicePort, _Mapping]]] = ..., type: _Optional[_Union[ServiceType, str]] = ..., session_affinity: _Optional[str] = ..., session_affinity_config: _Optional[_Union[SessionAffinityConfig, _Mapping]] = ..., ip_families: _Optional[_Iterable[str]] = ..., internal_traffic_policy: _Optional[str] = ..., traffic_distribution: _Optional[str] = ..., exported_labels: _Optional[_Mapping[str, str]] = ..., exported_annotations: _Optional[_Mapping[str, str]] = ..., locality: _Optional[_Iterable[_Union[LocalityTier, str]]] = ...) -> None: ...

class ExportVerdict(_message.Message):
    __slots__ = ["conflicts", "excluded_ports", "missing_ports", "participating", "winning_cluster_id"]
    CONFLICTS_FIELD_NUMBER: _ClassVar[int]
    EXCLUDED_PORTS_FIELD_NUMBER: _ClassVar[int]
    MISSING_PORTS_FIELD_NUMBER: _ClassVar[int]
    PARTICIPATING_FIELD_NUMBER: _ClassVar[int]
    WINNING_CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    conflicts: _containers.RepeatedScalarFieldContainer[ConflictReason]
    excluded_ports: _containers.RepeatedCompositeFieldContainer[ServicePort]
    missing_ports: _containers.RepeatedCompositeFieldContainer[ServicePort]
    participating: bool
    winning_cluster_id: str
    def __init__(self, conflicts: _Optional[_Iterable[_Union[ConflictReason, str]]] = ..., winning_cluster_id: _Optional[str] = ..., participating: bool = ..., missing_ports: _Optional[_Iterable[_Union[ServicePort, _Mapping]]] = ..., excluded_ports: _Optional[_Iterable[_Union[ServicePort, _Mapping]]] = ...) -> None: ...

class ImportCluster(_message.Message):
    __slots__ = ["cluster_id", "conflicts", "endpoint_groups", "excluded_ports", "export_create_time", "export_update_time", "held_region", "lease_state", "missing_ports", "region"]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    CONFLICTS_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_GROUPS_FIELD_NUMBER: _ClassVar[int]
    EXCLUDED_PORTS_FIELD_NUMBER: _ClassVar[int]
    EXPORT_CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    EXPORT_UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    HELD_REGION_FIELD_NUMBER: _ClassVar[int]
    LEASE_STATE_FIELD_NUMBER: _ClassVar[int]
    MISSING_PORTS_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    conflicts: _containers.RepeatedScalarFieldContainer[ConflictReason]
    endpoint_groups: _containers.RepeatedCompositeFieldContainer[EndpointGroup]
    excluded_ports: _containers.RepeatedCompositeFieldContainer[ServicePort]
    export_create_time: _timestamp_pb2.Timestamp
    export_update_time: _timestamp_pb2.Timestamp
    held_region: str
    lease_state: LeaseState
    missing_ports: _containers.RepeatedCompositeFieldContainer[ServicePort]
    region: str
    def __init__(self, cluster_id: _Optional[str] = ..., export_create_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., conflicts: _Optional[_Iterable[_Union[ConflictReason, str]]] = ..., endpoint_groups: _Optional[_Iterable[_Union[EndpointGroup, _Mapping]]] = ..., missing_ports: _Optional[_Iterable[_Union[ServicePort, _Mapping]]] = ..., excluded_ports: _Optional[_Iterable[_Union[ServicePort, _Mapping]]] = ..., export_update_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., lease_state: _Optional[_Union[LeaseState, str]] = ..., held_region: _Optional[str] = ..., region: _Optional[str] = ...) -> None: ...

class ImportDelta(_message.Message):
    __slots__ = ["clusters", "header", "removed_cluster_ids", "service"]
    CLUSTERS_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    REMOVED_CLUSTER_IDS_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    clusters: _containers.RepeatedCompositeFieldContainer[ImportCluster]
    header: ImportHeader
    removed_cluster_ids: _containers.RepeatedScalarFieldContainer[str]
    service: ServiceKey
    def __init__(self, service: _Optional[_Union[ServiceKey, _Mapping]] = ..., header: _Optional[_Union[ImportHeader, _Mapping]] = ..., clusters: _Optional[_Iterable[_Union[ImportCluster, _Mapping]]] = ..., removed_cluster_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ImportHeader(_message.Message):
    __slots__ = ["conflicts", "spec", "winning_cluster_id"]
    CONFLICTS_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    WINNING_CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    conflicts: _containers.RepeatedScalarFieldContainer[ConflictReason]
    spec: ImportSpec
    winning_cluster_id: str
    def __init__(self, spec: _Optional[_Union[ImportSpec, _Mapping]] = ..., winning_cluster_id: _Optional[str] = ..., conflicts: _Optional[_Iterable[_Union[ConflictReason, str]]] = ...) -> None: ...

class ImportSpec(_message.Message):
    __slots__ = ["annotations", "internal_traffic_policy", "ip_families", "labels", "locality", "ports", "session_affinity", "session_affinity_config", "traffic_distribution", "type"]
    class AnnotationsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class LabelsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    INTERNAL_TRAFFIC_POLICY_FIELD_NUMBER: _ClassVar[int]
    IP_FAMILIES_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    LOCALITY_FIELD_NUMBER: _ClassVar[int]
    PORTS_FIELD_NUMBER: _ClassVar[int]
    SESSION_AFFINITY_CONFIG_FIELD_NUMBER: _ClassVar[int]
    SESSION_AFFINITY_FIELD_NUMBER: _ClassVar[int]
    TRAFFIC_DISTRIBUTION_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    annotations: _containers.ScalarMap[str, str]
    internal_traffic_policy: str
    ip_families: _containers.RepeatedScalarFieldContainer[str]
    labels: _containers.ScalarMap[str, str]
    locality: _containers.RepeatedScalarFieldContainer[LocalityTier]
    ports: _containers.RepeatedCompositeFieldContainer[ServicePort]
    session_affinity: str
    session_affinity_config: SessionAffinityConfig
    traffic_distribution: str
    type: ServiceType
    def __init__(self, ports: _Optional[_Iterable[_Union[ServicePort, _Mapping]]] = ..., type: _Optional[_Union[ServiceType, str]] = ..., session_affinity: _Optional[str] = ..., session_affinity_config: _Optional[_Union[SessionAffinityConfig, _Mapping]] = ..., ip_families: _Optional[_Iterable[str]] = ..., internal_traffic_policy: _Optional[str] = ..., traffic_distribution: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., annotations: _Optional[_Mapping[str, str]] = ..., locality: _Optional[_Iterable[_Union[LocalityTier, str]]] = ...) -> None: ...

class Lease(_message.Message):
    __slots__ = ["duration", "expire_time", "renew_region", "renew_time", "replication_lag", "state"]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    RENEW_REGION_FIELD_NUMBER: _ClassVar[int]
    RENEW_TIME_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_LAG_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    duration: _duration_pb2.Duration
    expire_time: _timestamp_pb2.Timestamp
    renew_region: str
    renew_time: _timestamp_pb2.Timestamp
    replication_lag: _duration_pb2.Duration
    state: LeaseState
    def __init__(self, state: _Optional[_Union[LeaseState, str]] = ..., duration: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., renew_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., expire_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., renew_region: _Optional[str] = ..., replication_lag: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class ListClustersRequest(_message.Message):
    __slots__ = ["clusterset"]
    CLUSTERSET_FIELD_NUMBER: _ClassVar[int]
    clusterset: str
    def __init__(self, clusterset: _Optional[str] = ...) -> None: ...

class ListClustersResponse(_message.Message):
    __slots__ = ["clusters", "region", "registry_version", "replication_lags"]
    CLUSTERS_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    REGISTRY_VERSION_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_LAGS_FIELD_NUMBER: _ClassVar[int]
    clusters: _containers.RepeatedCompositeFieldContainer[Cluster]
    region: str
    registry_version: str
    replication_lags: _containers.RepeatedCompositeFieldContainer[ReplicationLag]
    def __init__(self, clusters: _Optional[_Iterable[_Union[Cluster, _Mapping]]] = ..., region: _Optional[str] = ..., replication_lags: _Optional[_Iterable[_Union[ReplicationLag, _Mapping]]] = ..., registry_version: _Optional[str] = ...) -> None: ...

class ListExportsRequest(_message.Message):
    __slots__ = ["cluster_id", "clusterset", "include_endpoints", "namespace"]
    CLUSTERSET_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    clusterset: str
    include_endpoints: bool
    namespace: str
    def __init__(self, clusterset: _Optional[str] = ..., cluster_id: _Optional[str] = ..., namespace: _Optional[str] = ..., include_endpoints: bool = ...) -> None: ...

class ListExportsResponse(_message.Message):
    __slots__ = ["exports", "unreadable"]
    EXPORTS_FIELD_NUMBER: _ClassVar[int]
    UNREADABLE_FIELD_NUMBER: _ClassVar[int]
    exports: _containers.RepeatedCompositeFieldContainer[Export]
    unreadable: _containers.RepeatedCompositeFieldContainer[UnreadableItem]
    def __init__(self, exports: _Optional[_Iterable[_Union[Export, _Mapping]]] = ..., unreadable: _Optional[_Iterable[_Union[UnreadableItem, _Mapping]]] = ...) -> None: ...

class ListImportsRequest(_message.Message):
    __slots__ = ["clusterset", "include_endpoints", "namespace"]
    CLUSTERSET_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    clusterset: str
    include_endpoints: bool
    namespace: str
    def __init__(self, clusterset: _Optional[str] = ..., namespace: _Optional[str] = ..., include_endpoints: bool = ...) -> None: ...

class ListImportsResponse(_message.Message):
    __slots__ = ["epoch", "imports", "revision"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    IMPORTS_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    epoch: str
    imports: _containers.RepeatedCompositeFieldContainer[ServiceImport]
    revision: int
    def __init__(self, imports: _Optional[_Iterable[_Union[ServiceImport, _Mapping]]] = ..., revision: _Optional[int] = ..., epoch: _Optional[str] = ...) -> None: ...

class PutExportRequest(_message.Message):
    __slots__ = ["cluster_id", "clusterset", "endpoint_groups", "service", "spec"]
    CLUSTERSET_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_GROUPS_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    clusterset: str
    endpoint_groups: _containers.RepeatedCompositeFieldContainer[EndpointGroup]
    service: ServiceKey
    spec: ExportSpec
    def __init__(self, clusterset: _Optional[str] = ..., cluster_id: _Optional[str] = ..., service: _Optional[_Union[ServiceKey, _Mapping]] = ..., spec: _Optional[_Union[ExportSpec, _Mapping]] = ..., endpoint_groups: _Optional[_Iterable[_Union[EndpointGroup, _Mapping]]] = ...) -> None: ...

class PutExportResponse(_message.Message):
    __slots__ = ["export", "verdict"]
    EXPORT_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    export: Export
    verdict: ExportVerdict
    def __init__(self, export: _Optional[_Union[Export, _Mapping]] = ..., verdict: _Optional[_Union[ExportVerdict, _Mapping]] = ...) -> None: ...

class RegisterClusterRequest(_message.Message):
    __slots__ = ["cluster_id", "clusterset", "controller_version", "lease_duration", "region"]
    CLUSTERSET_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_VERSION_FIELD_NUMBER: _ClassVar[int]
    LEASE_DURATION_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    clusterset: str
    controller_version: str
    lease_duration: _duration_pb2.Duration
    region: str
    def __init__(self, clusterset: _Optional[str] = ..., cluster_id: _Optional[str] = ..., region: _Optional[str] = ..., lease_duration: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., controller_version: _Optional[str] = ...) -> None: ...

class RegisterClusterResponse(_message.Message):
    __slots__ = ["cluster"]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    cluster: Cluster
    def __init__(self, cluster: _Optional[_Union[Cluster, _Mapping]] = ...) -> None: ...

class RenewLeaseRequest(_message.Message):
    __slots__ = ["cluster_id", "clusterset"]
    CLUSTERSET_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    clusterset: str
    def __init__(self, clusterset: _Optional[str] = ..., cluster_id: _Optional[str] = ...) -> None: ...

class RenewLeaseResponse(_message.Message):
    __slots__ = ["cluster"]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    cluster: Cluster
    def __init__(self, cluster: _Optional[_Union[Cluster, _Mapping]] = ...) -> None: ...

class ReplicationLag(_message.Message):
    __slots__ = ["lag", "source_region"]
    LAG_FIELD_NUMBER: _ClassVar[int]
    SOURCE_REGION_FIELD_NUMBER: _ClassVar[int]
    lag: _duration_pb2.Duration
    source_region: str
    def __init__(self, source_region: _Optional[str] = ..., lag: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class ServiceImport(_message.Message):
    __slots__ = ["clusters", "conflicts", "service", "spec", "winning_cluster_id"]
    CLUSTERS_FIELD_NUMBER: _ClassVar[int]
    CONFLICTS_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    WINNING_CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    clusters: _containers.RepeatedCompositeFieldContainer[ImportCluster]
    conflicts: _containers.RepeatedScalarFieldContainer[ConflictReason]
    service: ServiceKey
    spec: ImportSpec
    winning_cluster_id: str
    def __init__(self, service: _Optional[_Union[ServiceKey, _Mapping]] = ..., spec: _Optional[_Union[ImportSpec, _Mapping]] = ..., clusters: _Optional[_Iterable[_Union[ImportCluster, _Mapping]]] = ..., winning_cluster_id: _Optional[str] = ..., conflicts: _Optional[_Iterable[_Union[ConflictReason, str]]] = ...) -> None: ...

class ServiceKey(_message.Message):
    __slots__ = ["name", "namespace"]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    namespace: str
    def __init__(self, namespace: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class ServicePort(_message.Message):
    __slots__ = ["app_protocol", "name", "port", "protocol"]
    APP_PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    app_protocol: str
    name: str
    port: int
    protocol: str
    def __init__(self, name: _Optional[str] = ..., protocol: _Optional[str] = ..., app_protocol: _Optional[str] = ..., port: _Optional[int] = ...) -> None: ...

class SessionAffinityConfig(_message.Message):
    __slots__ = ["client_ip_timeout_seconds"]
    CLIENT_IP_TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    client_ip_timeout_seconds: int
    def __init__(self, client_ip_timeout_seconds: _Optional[int] = ...) -> None: ...

class SyncExportsRequest(_message.Message):
    __slots__ = ["cluster_id", "clusterset", "exports"]
    CLUSTERSET_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    EXPORTS_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    clusterset: str
    exports: _containers.RepeatedCompositeFieldContainer[ExportContent]
    def __init__(self, clusterset: _Optional[str] = ..., cluster_id: _Optional[str] = ..., exports: _Optional[_Iterable[_Union[ExportContent, _Mapping]]] = ...) -> None: ...

class SyncExportsResponse(_message.Message):
    __slots__ = ["deleted_exports", "results"]
    DELETED_EXPORTS_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    deleted_exports: int
    results: _containers.RepeatedCompositeFieldContainer[ExportResult]
    def __init__(self, results: _Optional[_Iterable[_Union[ExportResult, _Mapping]]] = ..., deleted_exports: _Optional[int] = ...) -> None: ...

class UnreadableItem(_message.Message):
    __slots__ = ["cluster_id", "key", "reason", "service"]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    key: str
    reason: str
    service: ServiceKey
    def __init__(self, key: _Optional[str] = ..., cluster_id: _Optional[str] = ..., service: _Optional[_Union[ServiceKey, _Mapping]] = ..., reason: _Optional[str] = ...) -> None: ...

class WatchImportsRequest(_message.Message):
    __slots__ = ["cluster_deltas", "clusterset", "include_endpoints", "namespace", "resume_epoch", "resume_revision", "snapshot_page_size"]
    CLUSTERSET_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_DELTAS_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    RESUME_EPOCH_FIELD_NUMBER: _ClassVar[int]
    RESUME_REVISION_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    cluster_deltas: bool
    clusterset: str
    include_endpoints: bool
    namespace: str
    resume_epoch: str
    resume_revision: int
    snapshot_page_size: int
    def __init__(self, clusterset: _Optional[str] = ..., namespace: _Optional[str] = ..., include_endpoints: bool = ..., resume_revision: _Optional[int] = ..., resume_epoch: _Optional[str] = ..., cluster_deltas: bool = ..., snapshot_page_size: _Optional[int] = ...) -> None: ...

class WatchImportsResponse(_message.Message):
    __slots__ = ["deletes", "deltas", "epoch", "revision", "snapshot", "snapshot_continues", "started_empty", "upserts"]
    DELETES_FIELD_NUMBER: _ClassVar[int]
    DELTAS_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_CONTINUES_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    STARTED_EMPTY_FIELD_NUMBER: _ClassVar[int]
    UPSERTS_FIELD_NUMBER: _ClassVar[int]
    deletes: _containers.RepeatedCompositeFieldContainer[ServiceKey]
    deltas: _containers.RepeatedCompositeFieldContainer[ImportDelta]
    epoch: str
    revision: int
    snapshot: bool
    snapshot_continues: bool
    started_empty: _timestamp_pb2.Timestamp
    upserts: _containers.RepeatedCompositeFieldContainer[ServiceImport]
    def __init__(self, epoch: _Optional[str] = ..., revision: _Optional[int] = ..., snapshot: bool = ..., upserts: _Optional[_Iterable[_Union[ServiceImport, _Mapping]]] = ..., deletes: _Optional[_Iterable[_Union[ServiceKey, _Mapping]]] = ..., deltas: _Optional[_Iterable[_Union[ImportDelta, _Mapping]]] = ..., snapshot_continues: bool = ..., started_empty: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class LeaseState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ErrorReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ServiceType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class LocalityTier(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ConflictReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

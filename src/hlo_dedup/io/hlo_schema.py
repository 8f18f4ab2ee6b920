"""The HLO proto schema, for text protos (pbtxt) only: a generated table, not hand-written.

Binary protos never need this (see `hlo_dedup.io.proto`). Text format names every field, so
reading or writing a `pbtxt` module needs all of them. jaxlib ships no `hlo_pb2`; the table
below lists the messages and enums reachable from `xla.HloSnapshot` — field names, numbers,
types, labels and oneofs — as jaxlib 0.10.2 was built with them (OpenXLA's
`xla/service/hlo.proto` and `xla/xla_data.proto`, Apache-2.0). It was produced by
`tests/io/gen_hlo_schema.py` from the descriptors embedded in jaxlib, and
`tests/io/test_formats.py` checks text protos round-trip through jaxlib with it.

Notation (a subset of .proto, one item per line): `enum NAME` then `VALUE = N` lines;
`message NAME` then `[repeated |optional |oneof ONEOF ]TYPE FIELD = N` lines. Nested types are
written `Outer.Inner`. Map fields appear as their repeated `...Entry` messages, which read and
write the same in text and binary form.
"""

from __future__ import annotations

import functools
from typing import Any

from .descriptors import TYPE_ENUM, TYPE_MESSAGE, TYPE_NUMBERS, EnumSpec, FieldSpec, MessageSpec, encode_file

SCHEMA = """\
enum CompilationEvent
  COMPILATION_EVENT_UNKNOWN_EVENT = 0
  COMPILATION_EVENT_FIRST_COMPILATION = 1
  COMPILATION_EVENT_RECOMPILATION = 2
enum ConvolutionKind
  CONVOLUTION_KIND_UNSET = 0
  CONVOLUTION_KIND_FPROP = 1
  CONVOLUTION_KIND_DGRAD = 2
  CONVOLUTION_KIND_WGRAD = 3
enum CustomCallApiVersion
  API_VERSION_UNSPECIFIED = 0
  API_VERSION_ORIGINAL = 1
  API_VERSION_STATUS_RETURNING = 2
  API_VERSION_STATUS_RETURNING_UNIFIED = 3
  API_VERSION_TYPED_FFI = 4
enum CustomCallSchedule
  SCHEDULE_NONE = 0
  SCHEDULE_LATEST = 1
  SCHEDULE_EARLIEST = 2
enum DimLevelType
  DIM_DENSE = 0
  DIM_COMPRESSED = 1
  DIM_SINGLETON = 2
  DIM_LOOSE_COMPRESSED = 3
enum FftType
  FFT = 0
  IFFT = 1
  RFFT = 2
  IRFFT = 3
enum HeapSimulatorTrace.Event.Kind
  ALLOC = 0
  FREE = 1
  SHARE_WITH = 2
enum HloModuleProto.ProfileType
  INVALID = 0
  FLAG = 1
  FUSION = 2
  LAYOUT = 3
  DOT = 4
  FLAGNET = 5
  SHARDING = 6
  SCHEDULE = 7
enum Kind
  UNDEFINED_ALIAS = 0
  MAY_ALIAS = 1
  MUST_ALIAS = 2
enum OpSharding.ShardGroupType
  AS = 0
  LIKE = 1
enum OpSharding.Type
  REPLICATED = 0
  MAXIMAL = 1
  TUPLE = 2
  OTHER = 3
  MANUAL = 4
  UNKNOWN = 5
  UNREDUCED = 6
enum PaddingType
  PADDING_INVALID = 0
  PADDING_VALID = 1
  PADDING_SAME = 2
enum PrecisionConfig.Algorithm
  ALG_UNSET = 0
  ALG_DOT_ANY_F8_ANY_F8_F32 = 1
  ALG_DOT_ANY_F8_ANY_F8_F32_FAST_ACCUM = 2
  ALG_DOT_F16_F16_F16 = 3
  ALG_DOT_F16_F16_F32 = 4
  ALG_DOT_BF16_BF16_BF16 = 5
  ALG_DOT_BF16_BF16_F32 = 6
  ALG_DOT_BF16_BF16_F32_X3 = 7
  ALG_DOT_BF16_BF16_F32_X6 = 8
  ALG_DOT_TF32_TF32_F32 = 9
  ALG_DOT_TF32_TF32_F32_X3 = 10
  ALG_DOT_F32_F32_F32 = 11
  ALG_DOT_F64_F64_F64 = 12
  ALG_DOT_BF16_BF16_F32_X9 = 13
enum PrecisionConfig.Precision
  DEFAULT = 0
  HIGH = 1
  HIGHEST = 2
enum PrimitiveType
  PRIMITIVE_TYPE_INVALID = 0
  PRED = 1
  S1 = 30
  S2 = 26
  S4 = 21
  S8 = 2
  S16 = 3
  S32 = 4
  S64 = 5
  U1 = 31
  U2 = 27
  U4 = 22
  U8 = 6
  U16 = 7
  U32 = 8
  U64 = 9
  F16 = 10
  F32 = 11
  BF16 = 16
  F64 = 12
  F8E5M2 = 19
  F8E4M3 = 28
  F8E4M3FN = 20
  F8E4M3B11FNUZ = 23
  F8E3M4 = 29
  F8E5M2FNUZ = 24
  F8E4M3FNUZ = 25
  F4E2M1FN = 32
  F8E8M0FNU = 33
  F6E3M2FN = 35
  F6E2M3FN = 36
  C64 = 15
  C128 = 18
  TUPLE = 13
  OPAQUE_TYPE = 14
  TOKEN = 17
  BUFFER = 34
enum ProfileGenerationStrategy
  PROFILE_GENERATION_STRATEGY_UNKNOWN = 0
  PROFILE_GENERATION_STRATEGY_GA = 1
  PROFILE_GENERATION_STRATEGY_FANTA = 2
  PROFILE_GENERATION_STRATEGY_CFO = 3
  PROFILE_GENERATION_STRATEGY_EXHAUSTIVE = 4
  PROFILE_GENERATION_STRATEGY_LCM_GNN = 5
  PROFILE_GENERATION_STRATEGY_LCM_MOE = 6
enum ProfileSource
  PROFILE_SOURCE_UNKNOWN_SOURCE = 0
  PROFILE_SOURCE_EMBEDDED = 1
  PROFILE_SOURCE_REMOTE = 2
enum ProfileType
  INVALID = 0
  WINDOW = 1
  FLAG = 2
  INTEGER = 3
enum RandomAlgorithm
  RNG_DEFAULT = 0
  RNG_THREE_FRY = 1
  RNG_PHILOX = 2
enum RandomDistribution
  RNG_INVALID = 0
  RNG_UNIFORM = 1
  RNG_NORMAL = 2
enum ResultAccuracy.Mode
  DEFAULT = 0
  HIGHEST = 1
enum TriState
  TRI_STATE_UNSPECIFIED = 0
  TRI_STATE_TRUE = 1
  TRI_STATE_FALSE = 2
enum TriangularSolveOptions.Transpose
  TRANSPOSE_INVALID = 0
  NO_TRANSPOSE = 1
  TRANSPOSE = 2
  ADJOINT = 3
message AxisRefProto
  int64 mesh_axis_index = 1
  optional AxisRefProto.SubAxis sub_axis_info = 2
message AxisRefProto.SubAxis
  int64 pre_size = 1
  int64 size = 2
message BufferAllocationProto
  int64 index = 1
  int64 size = 2
  bool is_thread_local = 3
  bool is_tuple = 11
  bool is_entry_computation_parameter = 5
  bool is_constant = 12
  int64 parameter_number = 6
  repeated int64 parameter_shape_index = 10
  bool is_parameter_aliased_with_output = 13
  bool maybe_live_out = 7
  int64 color = 8
  repeated BufferAllocationProto.Assigned assigned = 9
message BufferAllocationProto.Assigned
  int64 logical_buffer_id = 1
  int64 offset = 2
  int64 size = 3
  PrimitiveType element_type = 4
message BufferAssignmentProto
  repeated LogicalBufferProto logical_buffers = 1
  repeated BufferAssignmentProto.BufferAlias buffer_aliases = 2
  repeated BufferAllocationProto buffer_allocations = 3
  repeated HeapSimulatorTrace heap_simulator_traces = 4
  repeated BufferAssignmentProto.PeakBuffers peak_buffers = 5
message BufferAssignmentProto.BufferAlias
  int64 source_buffer_id = 1
  LogicalBufferProto.Location location = 2
message BufferAssignmentProto.PeakBuffers
  int64 index = 1
  repeated int64 logical_buffer_ids = 2
message CholeskyOptions
  bool lower = 1
message CollectiveDeviceListProto
  repeated ReplicaGroup replica_groups = 1
message ConvolutionDimensionNumbers
  int64 input_batch_dimension = 7
  int64 input_feature_dimension = 8
  repeated int64 input_spatial_dimensions = 11
  int64 kernel_input_feature_dimension = 3
  int64 kernel_output_feature_dimension = 4
  repeated int64 kernel_spatial_dimensions = 6
  int64 output_batch_dimension = 9
  int64 output_feature_dimension = 10
  repeated int64 output_spatial_dimensions = 12
message CrossProgramPrefetch
  int64 parameter = 1
  repeated int64 index = 2
  int64 offset = 3
message DeviceAssignmentProto
  int32 replica_count = 1
  int32 computation_count = 2
  repeated DeviceAssignmentProto.ComputationDevice computation_devices = 3
message DeviceAssignmentProto.ComputationDevice
  repeated int64 replica_device_ids = 1
message DotDimensionNumbers
  repeated int64 lhs_contracting_dimensions = 1
  repeated int64 rhs_contracting_dimensions = 2
  repeated int64 lhs_batch_dimensions = 3
  repeated int64 rhs_batch_dimensions = 4
message FrontendAttributes
  repeated FrontendAttributes.MapEntry map = 1
message FrontendAttributes.MapEntry
  string key = 1
  string value = 2
message GatherDimensionNumbers
  repeated int64 offset_dims = 1
  repeated int64 collapsed_slice_dims = 2
  repeated int64 start_index_map = 3
  int64 index_vector_dim = 4
  repeated int64 operand_batching_dims = 5
  repeated int64 start_indices_batching_dims = 6
message HeapSimulatorTrace
  repeated HeapSimulatorTrace.Event events = 1
  bool whole_module_simulation = 2
  int64 buffer_allocation_index = 3
message HeapSimulatorTrace.Event
  HeapSimulatorTrace.Event.Kind kind = 1
  int64 buffer_id = 2
  string computation_name = 3
  string instruction_name = 4
  int64 share_with_canonical_id = 5
message HloBufferDonorProto
  repeated HloBufferDonorProto.BufferDonorEntryProto entries = 1
message HloBufferDonorProto.BufferDonorEntryProto
  int64 parameter_number = 1
  repeated int64 parameter_shape_index = 2
message HloComputationProto
  string name = 1
  repeated HloInstructionProto instructions = 2
  ProgramShapeProto program_shape = 4
  int64 id = 5
  int64 root_id = 6
  bool is_fusion_computation = 7
  string execution_thread = 8
message HloInputOutputAliasProto
  repeated HloInputOutputAliasProto.AliasEntryProto entries = 1
message HloInputOutputAliasProto.AliasEntryProto
  repeated int64 output_shape_index = 1
  int64 parameter_number = 2
  repeated int64 parameter_shape_index = 3
  Kind kind = 4
message HloInstructionProto
  string name = 1
  string opcode = 2
  ShapeProto shape = 3
  OpMetadata metadata = 7
  LiteralProto literal = 8
  int64 parameter_number = 9
  string fusion_kind = 11
  int64 tuple_index = 13
  repeated int64 dimensions = 14
  Window window = 15
  ConvolutionDimensionNumbers convolution_dimension_numbers = 16
  int64 feature_group_count = 50
  int64 batch_group_count = 58
  repeated HloInstructionProto.SliceDimensions slice_dimensions = 17
  int32 exponent_bits = 18
  int32 mantissa_bits = 19
  repeated int64 dynamic_slice_sizes = 20
  PaddingConfig padding_config = 21
  bytes outfeed_config = 22
  RandomDistribution distribution = 23
  float epsilon = 24
  int64 feature_index = 25
  int64 channel_id = 26
  bytes infeed_config = 27
  string custom_call_target = 28
  ShapeProto outfeed_shape = 29
  DotDimensionNumbers dot_dimension_numbers = 30
  RaggedDotDimensionNumbers ragged_dot_dimension_numbers = 90
  FftType fft_type = 31
  repeated int64 fft_length = 32
  string comparison_direction = 63
  GatherDimensionNumbers gather_dimension_numbers = 33
  repeated int64 gather_slice_sizes = 34
  int64 id = 35
  repeated int64 operand_ids = 36
  repeated int64 control_predecessor_ids = 37
  repeated int64 called_computation_ids = 38
  OpSharding sharding = 40
  bytes backend_config = 43
  Payload backend_config_payload = 99
  repeated ReplicaGroup replica_groups = 49
  int64 all_reduce_id = 45
  bool use_global_device_ids = 71
  bool is_host_transfer = 47
  bool is_stable = 60
  ScatterDimensionNumbers scatter_dimension_numbers = 48
  PrecisionConfig precision_config = 51
  repeated SourceTarget source_target_pairs = 52
  OpSharding domain_entry_sharding = 54
  OpSharding domain_exit_sharding = 55
  bool constrain_layout = 56
  repeated ShapeProto operand_shapes_with_layout = 57
  TriangularSolveOptions triangular_solve_options = 59
  CholeskyOptions cholesky_options = 62
  ParameterReplication parameter_replication = 61
  bool custom_call_has_side_effect = 65
  repeated OutputOperandAliasing output_operand_aliasing = 74
  CustomCallSchedule custom_call_schedule = 76
  int64 delta = 66
  bool indices_are_sorted = 67
  FrontendAttributes frontend_attributes = 68
  bool unique_indices = 69
  RandomAlgorithm rng_algorithm = 70
  string comparison_type = 72
  bool is_cross_program_prefetch = 73
  oneof optional_cross_program_prefetch_index int32 cross_program_prefetch_index = 80
  PaddingType padding_type = 75
  CustomCallApiVersion custom_call_api_version = 77
  string async_execution_thread = 79
  int64 k = 81
  bool largest = 85
  StatisticsViz statistics_viz = 82
  oneof replica_group_list CollectiveDeviceListProto collective_device_list = 87
  oneof replica_group_list IotaReplicaGroupListProto iota_collective_device_list = 92
  oneof replica_group_list MeshAxesReplicaGroupListProto mesh_axes_replica_group_list = 93
  OriginalValueProto original_value = 88
  bool is_composite = 89
  ResultAccuracy result_accuracy = 91
  bool is_reverse = 94
  int64 num_carries = 95
  TriState is_associative = 96
  ConvolutionKind conv_kind = 97
  SparsityConfig sparsity_config = 98
message HloInstructionProto.SliceDimensions
  int64 start = 1
  int64 limit = 2
  int64 stride = 3
message HloModuleProto
  string name = 1
  string entry_computation_name = 2
  int64 entry_computation_id = 6
  repeated HloComputationProto computations = 3
  ProgramShapeProto host_program_shape = 4
  int64 id = 5
  optional int64 pjrt_id = 23
  HloScheduleProto schedule = 7
  HloInputOutputAliasProto input_output_alias = 8
  repeated bytes payloads = 22
  HloBufferDonorProto buffer_donor = 18
  repeated CrossProgramPrefetch cross_program_prefetches = 10
  bool is_dynamic = 11
  OpSharding spmd_output_sharding = 12
  repeated OpSharding spmd_parameters_shardings = 14
  bool use_auto_spmd_partitioning = 16
  repeated HloModuleProto.ProfileInfo profile_info = 13
  DeviceAssignmentProto device_assignment = 15
  StackFrameIndexProto stack_frame_index = 17
  FrontendAttributes frontend_attributes = 19
  OriginalValueRecoveryTableProto original_value_recovery_table = 20
  string device_type = 21
message HloModuleProto.ProfileInfo
  HloModuleProto.ProfileType profile_type = 1
  double relative_speedup = 2
  ProfileSource profile_source = 3
  CompilationEvent compilation_event = 4
  string fingerprint = 5
  ProfileGenerationStrategy profile_generation_strategy = 6
  int64 original_changelist = 7
  int64 changelist = 8
message HloProto
  HloModuleProto hlo_module = 1
  BufferAssignmentProto buffer_assignment = 3
message HloScheduleProto
  repeated HloScheduleProto.SequencesEntry sequences = 1
message HloScheduleProto.InstructionSequence
  repeated int64 instruction_ids = 1
message HloScheduleProto.SequencesEntry
  int64 key = 1
  HloScheduleProto.InstructionSequence value = 2
message HloSnapshot
  HloProto hlo = 1
  repeated LiteralProto arguments = 2
  LiteralProto result = 3
  string execution_platform = 4
message IotaReplicaGroupListProto
  int64 num_replica_groups = 1
  int64 num_devices_per_group = 2
  repeated int64 iota_reshape_dims = 3
  repeated int32 iota_transpose_perm = 4
message LayoutProto
  repeated int64 minor_to_major = 1
  repeated DimLevelType dim_level_types = 9
  repeated bool dim_unique = 13
  repeated bool dim_ordered = 14
  repeated TileProto tiles = 6
  int64 tail_padding_alignment_in_elements = 16
  int64 element_size_in_bits = 7
  int64 memory_space = 8
  PrimitiveType index_primitive_type = 11
  PrimitiveType pointer_primitive_type = 12
  ShapeProto physical_shape = 10
  int64 dynamic_shape_metadata_prefix_bytes = 15
  repeated SplitConfigProto split_configs = 17
message LiteralProto
  ShapeProto shape = 1
  repeated bool preds = 2
  bytes s1s = 30
  bytes s2s = 26
  bytes s4s = 21
  bytes s8s = 15
  bytes u1s = 31
  bytes u2s = 27
  bytes u4s = 22
  bytes u8s = 3
  repeated int32 s32s = 4
  repeated int64 s64s = 5
  repeated uint32 u32s = 6
  repeated uint64 u64s = 7
  repeated float f32s = 8
  repeated double f64s = 9
  repeated float c64s = 12
  repeated double c128s = 18
  repeated LiteralProto tuple_literals = 10
  bytes f16s = 11
  bytes bf16s = 13
  bytes u16s = 16
  bytes s16s = 17
  bytes f4e2m1fns = 32
  bytes f8e3m4s = 29
  bytes f8e4m3b11fnuzs = 23
  bytes f8e4m3fns = 20
  bytes f8e4m3fnuzs = 25
  bytes f8e4m3s = 28
  bytes f8e5m2fnuzs = 24
  bytes f8e5m2s = 19
  bytes f8e8m0fnus = 33
  bytes f6e3m2fns = 35
  bytes f6e2m3fns = 36
  repeated int64 sparse_indices = 14
  repeated int32 dynamic_sizes = 34
message LogicalBufferProto
  int64 id = 1
  int64 size = 2
  LogicalBufferProto.Location defined_at = 3
  int64 color = 4
message LogicalBufferProto.Location
  string instruction_name = 2
  int64 instruction_id = 4
  repeated int64 shape_index = 3
message MeshAxesReplicaGroupListProto
  MeshProto mesh = 1
  repeated AxisRefProto axes = 2
message MeshProto
  repeated MeshProto.MeshAxis axes = 1
  repeated int64 device_ids = 2
  optional MeshProto.IotaTransform iota_transform = 3
message MeshProto.IotaTransform
  repeated int64 reshape_dims = 1
  repeated int64 transpose_perm = 2
message MeshProto.MeshAxis
  string name = 1
  int64 size = 2
message NamedShardingProto
  MeshProto mesh = 2
  repeated NamedShardingProto.DimensionSharding dim_shardings = 3
  repeated AxisRefProto replicated_axes = 4
  repeated AxisRefProto unreduced_axes = 5
  repeated AxisRefProto manual_axes = 7
  repeated OpMetadata metadata = 6
message NamedShardingProto.DimensionSharding
  repeated AxisRefProto axes = 1
  bool is_closed = 2
message OpMetadata
  string op_type = 1
  string op_name = 2
  string source_file = 3
  int32 source_line = 4
  int32 source_end_line = 17
  int32 source_column = 18
  int32 source_end_column = 19
  repeated ProfileType profile_type = 5
  int64 size_of_generated_code_in_bytes = 8
  int64 size_of_memory_working_set_in_bytes = 9
  OpMetadata.ProfileInfo profile_info = 10
  string deduplicated_name = 12
  int32 stack_frame_id = 15
  string scheduling_name = 16
  Payload metadata_payload = 20
message OpMetadata.ProfileInfo
  repeated ProfileType profile_type = 1
  double relative_speedup = 2
  ProfileSource profile_source = 3
  CompilationEvent compilation_event = 4
  ProfileGenerationStrategy profile_generation_strategy = 5
message OpSharding
  OpSharding.Type type = 1
  ShapeProto tile_shape = 2
  repeated int64 tile_assignment_dimensions = 3
  repeated int64 tile_assignment_devices = 4
  repeated OpSharding tuple_shardings = 5
  bool replicate_on_last_tile_dim = 6
  repeated OpMetadata metadata = 7
  repeated OpSharding.Type last_tile_dims = 8
  repeated int64 iota_reshape_dims = 9
  repeated int32 iota_transpose_perm = 10
  bool is_shard_group = 11
  int64 shard_group_id = 12
  OpSharding.ShardGroupType shard_group_type = 13
  optional NamedShardingProto named_sharding = 14
message OriginalArrayProto
  string instruction_name = 1
  repeated int64 shape_index = 2
message OriginalValueElementProto
  repeated int64 shape_index = 1
  OriginalArrayProto original_array = 2
message OriginalValueProto
  repeated OriginalValueElementProto elements = 1
  bool is_synthetic_call = 2
message OriginalValueRecoveryTableProto
  repeated OriginalValueRecoveryTableProto.Entry entries = 1
message OriginalValueRecoveryTableProto.Entry
  OriginalArrayProto old_original_array = 1
  OriginalArrayProto new_original_array = 2
  HloModuleProto recovery_module = 3
message OutputOperandAliasing
  repeated int64 output_shape_index = 1
  int64 operand_index = 2
  repeated int64 operand_shape_index = 3
message PaddingConfig
  repeated PaddingConfig.PaddingConfigDimension dimensions = 1
message PaddingConfig.PaddingConfigDimension
  int64 edge_padding_low = 1
  int64 edge_padding_high = 2
  int64 interior_padding = 3
message ParameterReplication
  repeated bool replicated_at_leaf_buffers = 1
message Payload
  oneof payload_source bytes value = 1
  oneof payload_source int64 id = 2
message PrecisionConfig
  repeated PrecisionConfig.Precision operand_precision = 1
  PrecisionConfig.Algorithm algorithm = 2
message ProgramShapeProto
  repeated ShapeProto parameters = 1
  ShapeProto result = 2
  repeated string parameter_names = 3
message RaggedDotDimensionNumbers
  DotDimensionNumbers dot_dimension_numbers = 1
  repeated int64 lhs_ragged_dimensions = 2
  repeated int64 rhs_group_dimensions = 3
message ReplicaGroup
  repeated int64 replica_ids = 1
message ResultAccuracy
  oneof specs ResultAccuracy.Mode mode = 1
  oneof specs ResultAccuracy.Tolerance tolerance = 2
message ResultAccuracy.Tolerance
  double atol = 1
  double rtol = 2
  int64 ulps = 3
message ScatterDimensionNumbers
  repeated int64 update_window_dims = 1
  repeated int64 inserted_window_dims = 2
  repeated int64 scatter_dims_to_operand_dims = 3
  int64 index_vector_dim = 4
  repeated int64 input_batching_dims = 5
  repeated int64 scatter_indices_batching_dims = 6
message ShapeProto
  PrimitiveType element_type = 2
  repeated int64 dimensions = 3
  repeated bool is_dynamic_dimension = 6
  repeated ShapeProto tuple_shapes = 4
  LayoutProto layout = 5
message SourceTarget
  int64 source = 1
  int64 target = 2
message SparsityConfig
  SparsityConfig.TensorSparsityConfig lhs = 1
  SparsityConfig.TensorSparsityConfig rhs = 2
message SparsityConfig.TensorSparsityConfig
  int64 num_non_zero = 1
  int64 block_size = 2
  int64 dimension = 3
  int64 stride = 4
message SplitConfigProto
  int64 dimension = 1
  repeated int64 split_indices = 2
message StackFrameIndexProto
  repeated string file_names = 1
  repeated string function_names = 2
  repeated StackFrameIndexProto.FileLocation file_locations = 3
  repeated StackFrameIndexProto.StackFrame stack_frames = 4
message StackFrameIndexProto.FileLocation
  int32 file_name_id = 1
  int32 function_name_id = 2
  int32 line = 3
  int32 end_line = 5
  int32 column = 4
  int32 end_column = 6
message StackFrameIndexProto.StackFrame
  int32 file_location_id = 1
  int32 parent_frame_id = 2
message Statistic
  string stat_name = 1
  double stat_val = 2
message StatisticsViz
  int64 stat_index_to_visualize = 1
  repeated Statistic statistics = 2
message TileProto
  repeated int64 dimensions = 1
message TriangularSolveOptions
  bool left_side = 1
  bool lower = 2
  bool unit_diagonal = 3
  TriangularSolveOptions.Transpose transpose_a = 4
message Window
  repeated WindowDimension dimensions = 1
message WindowDimension
  int64 size = 1
  int64 stride = 2
  int64 padding_low = 3
  int64 padding_high = 4
  int64 window_dilation = 5
  int64 base_dilation = 6
  bool window_reversal = 7
"""

@functools.lru_cache(maxsize=None)
def specs() -> tuple[tuple[MessageSpec, ...], tuple[EnumSpec, ...]]:
    """SCHEMA as message and enum specs (package ``xla``; nested names ``Outer.Inner``)."""
    messages: list[MessageSpec] = []
    enums: list[EnumSpec] = []
    for line in SCHEMA.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            kind, name = line.split()
            if kind == "enum":
                enums.append(EnumSpec(name))
            else:
                messages.append(MessageSpec(name))
            current = kind
            continue
        decl, number = (part.strip() for part in line.split("="))
        if current == "enum":
            enums[-1].values.append((decl, int(number)))
            continue
        words = decl.split()
        field = FieldSpec(words[-1], int(number), 0)
        if words[0] == "repeated":
            field.repeated = True
        elif words[0] == "optional":
            field.optional = True
        elif words[0] == "oneof":
            field.oneof = words[1]
        type_text = words[-2]
        messages[-1].fields.append(field)
        field.type = TYPE_NUMBERS.get(type_text, 0)
        if not field.type:
            field.type_name = ".xla." + type_text
    enum_names = {e.name for e in enums}
    for msg in messages:
        for field in msg.fields:
            if field.type_name:
                field.type = TYPE_ENUM if field.type_name[5:] in enum_names else TYPE_MESSAGE
    return tuple(messages), tuple(enums)


@functools.lru_cache(maxsize=None)
def file_descriptor_proto() -> Any:
    """A ``descriptor_pb2.FileDescriptorProto`` (package ``xla``) built from SCHEMA."""
    from google.protobuf import descriptor_pb2

    messages, enums = specs()
    return descriptor_pb2.FileDescriptorProto.FromString(
        encode_file("hlo_dedup/hlo_schema.proto", "xla", messages, enums)
    )

/* Stub of librocprofiler-sdk.so: the entry points Proton's RocprofSDK profiler
 * resolves with dlsym (Driver/GPU/RocprofApi.cpp, Triton 3.8.0 and 3.9.0). */
#include "stub_common.h"

STUB_MARKER("librocprofiler-sdk.so")

STUB_OK(rocprofiler_assign_callback_thread)
STUB_OK(rocprofiler_configure_buffer_tracing_service)
STUB_OK(rocprofiler_configure_callback_tracing_service)
STUB_OK(rocprofiler_configure_external_correlation_id_request_service)
STUB_OK(rocprofiler_create_buffer)
STUB_OK(rocprofiler_create_callback_thread)
STUB_OK(rocprofiler_create_context)
STUB_OK(rocprofiler_destroy_buffer)
STUB_OK(rocprofiler_destroy_context)
STUB_OK(rocprofiler_flush_buffer)
STUB_OK(rocprofiler_force_configure)
STUB_OK(rocprofiler_get_timestamp)
STUB_OK(rocprofiler_is_initialized)
STUB_OK(rocprofiler_query_available_agents) /* never calls back: no agents */
STUB_OK(rocprofiler_register_library_api_table)
STUB_OK(rocprofiler_start_context)
STUB_OK(rocprofiler_stop_context)
STUB_OK(rocprofiler_configure_pc_sampling_service)
STUB_OK(rocprofiler_query_pc_sampling_agent_configurations)

/* Stub of libroctracer64.so: the entry points Proton's Roctracer profiler resolves
 * with dlsym (Driver/GPU/RoctracerApi.cpp, Triton 3.6.0 to 3.9.0). */
#include "stub_common.h"

STUB_MARKER("libroctracer64.so")

STUB_OK(roctracer_activity_pop_external_correlation_id)
STUB_OK(roctracer_activity_push_external_correlation_id)
STUB_OK(roctracer_close_pool)
STUB_OK(roctracer_disable_domain_activity)
STUB_OK(roctracer_disable_domain_callback)
STUB_OK(roctracer_disable_op_activity)
STUB_OK(roctracer_disable_op_callback)
STUB_OK(roctracer_enable_domain_activity)
STUB_OK(roctracer_enable_domain_callback)
STUB_OK(roctracer_enable_op_activity)
STUB_OK(roctracer_enable_op_callback)
STUB_OK(roctracer_flush_activity)
STUB_OK(roctracer_get_timestamp)
STUB_OK(roctracer_next_record)
STUB_OK(roctracer_open_pool)
STUB_OK(roctracer_set_properties)
STUB_OK(roctracer_start)
STUB_OK(roctracer_stop)

const char *roctracer_op_string(unsigned domain, unsigned op, unsigned kind) {
  (void)domain; (void)op; (void)kind;
  return "stub";
}

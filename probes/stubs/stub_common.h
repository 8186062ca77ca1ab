/* Shared by proton-survey's stub libraries.
 *
 * A stub stands in for a ROCm library that Proton dlopens, so that the probe can
 * ask "does this Triton build accept the mode?" on a host where the real library
 * is absent or fails to load first. Every entry point does nothing and reports
 * success (0) unless noted; out-parameters that describe devices report none.
 * Results obtained with a stub are marked `stub: true` in the probe report and are
 * never presented as live results.
 */
#ifndef PROTON_SURVEY_STUB_COMMON_H
#define PROTON_SURVEY_STUB_COMMON_H

#define STUB_OK(name) int name(void) { return 0; }

/* Lets the probe confirm, from /proc/self/maps or dlsym, that a stub was loaded. */
#define STUB_MARKER(lib) const char proton_survey_stub[] = "proton-survey stub for " lib;

#endif

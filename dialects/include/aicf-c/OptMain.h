/*===- aicf-c/OptMain.h - the aicf-opt driver --------------------*- C -*-===*/
#ifndef AICF_C_OPTMAIN_H
#define AICF_C_OPTMAIN_H

#include "mlir-c/Support.h"

#ifdef __cplusplus
extern "C" {
#endif

/// mlir-opt compatible driver over hl, ll, the upstream dialects AICF's
/// pipeline uses, all upstream passes and the AICF passes. Pass bodies must
/// be installed (aicfSetPassBody) before this is called. Returns the process
/// exit code.
MLIR_CAPI_EXPORTED int aicfOptMain(int argc, char **argv);

#ifdef __cplusplus
}
#endif

#endif // AICF_C_OPTMAIN_H

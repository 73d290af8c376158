/* Copyright: gb10.serving contributors
 * GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
 *
 * A stand-in for NCCL's libnccl.so.2 where no NCCL can run: the simulated serving image (vLLM's
 * CPU build has no NCCL) and the tests of role serving_image. It answers the one call the
 * collection makes of the library the engine loads, ncclGetVersion() (rule N7), with the
 * NCCL_VERSION_CODE it was built with, as nccl.h encodes it from NCCL 2.9 on (X*10000 + Y*100 + Z):
 *
 *     cc -shared -fPIC -Wl,-soname,libnccl.so.2 -DGB10_NCCL_VERSION_CODE=23102 \
 *         -o libnccl.so.2 libnccl_standin.c
 *
 * The codes the tests use are field figures: 2.31.2, the NCCL a GB10 box ran under the community
 * launcher's vLLM image ("vLLM is using nccl==2.31.2", eugr/spark-vllm-docker issue 411); 2.29.7,
 * what the MiniMax M3 fork's image ships, too old for the switchless ring's settings (rule N6, which
 * need 2.30).
 */
#ifndef GB10_NCCL_VERSION_CODE
#error "build with -DGB10_NCCL_VERSION_CODE=<NCCL_VERSION_CODE>, e.g. 23102 for NCCL 2.31.2"
#endif

typedef enum { ncclSuccess = 0, ncclInvalidArgument = 4 } ncclResult_t;

ncclResult_t ncclGetVersion(int *version)
{
    if (version == 0)
        return ncclInvalidArgument;
    *version = GB10_NCCL_VERSION_CODE;
    return ncclSuccess;
}

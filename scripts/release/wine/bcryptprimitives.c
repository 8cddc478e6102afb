/* Only for running the Windows build under Wine 8 (Debian 12), which lacks bcryptprimitives.dll: Rust's
 * standard library takes random bytes from its ProcessPrng (Windows 10 and later have it). Built by
 * scripts/build-release.sh beside the binary it checks; never shipped. */
#include <windows.h>
#include <ntsecapi.h>

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len > 0) {
        ULONG chunk = len > 0x7fffffff ? 0x7fffffff : (ULONG)len;
        if (!RtlGenRandom(data, chunk)) return FALSE;
        data += chunk;
        len -= chunk;
    }
    return TRUE;
}

// A crash (SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL) prints the signal and a
// symbolised stack trace to stderr, that is into the process's log, before
// the process dies with the same signal: on a GPU machine without a debugger
// the log is all an operator has.
//
//   int main(int argc, char** argv) {
//     kforge::InstallCrashReport(argv[0]);
//     ...
//   }
#ifndef KFORGE_COMMON_SERVER_CRASH_REPORT_H_
#define KFORGE_COMMON_SERVER_CRASH_REPORT_H_

namespace kforge {

void InstallCrashReport(const char* argv0);

}  // namespace kforge

#endif  // KFORGE_COMMON_SERVER_CRASH_REPORT_H_

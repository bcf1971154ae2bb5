// Ctrl-C (SIGINT) and SIGTERM in scalelab-cli's long-running commands (run, study
// run/rerun/watch/continue, lr-find, probe): the first signal asks the command to end in
// order, a second one ends the process at once.
//
//   InterruptGuard interrupts; // first thing after the arguments, so it outlives the agents
//   ...
//   if (interrupts.requested()) ... // a command blocked outside the event loop asks
//   interrupts.onInterrupt([&](int signal) { ... }); // or is called on the event loop
//
// Async-signal-safe: the handler only counts, writes one byte to a socket pair and, for the
// second signal, writes a fixed line to standard error and calls _exit(128 + signal), all
// of which POSIX allows in a handler. The byte wakes a QSocketNotifier on the event loop of
// the thread that made the guard, where the command's callback then runs, once. The second
// signal's exit skips the command's clean-up on purpose: local agents go with the process
// (PR_SET_PDEATHSIG: they stop their runs), a study's journal is as after a crash (which it
// survives), a run on a remote agent may still be stopping.
//
// A handler rather than the agent's blocked signals and sigwait(): the CLI starts children
// through QProcess (local agents, the worker that checks a module), which would inherit a
// blocked mask; a caught signal is reset to its default in a child at exec.
//
// One guard at a time; made and destroyed on the main thread, where it restores the
// handlers it replaced.
#pragma once

#include <QSocketNotifier>
#include <QString>

#include <functional>
#include <memory>

namespace scalelab::app {

class InterruptGuard {
public:
    InterruptGuard();
    ~InterruptGuard();
    InterruptGuard(const InterruptGuard &) = delete;
    InterruptGuard &operator=(const InterruptGuard &) = delete;

    // Whether a signal came (from any thread, at any time).
    bool requested() const;
    // The first signal's number, 0 before one came.
    int signal() const;
    // `callback` is called with the first signal's number on the event loop of the guard's
    // thread, once: when the signal comes, or at the next turn of the loop if it came already.
    void onInterrupt(std::function<void(int signal)> callback);

    // The exit code of a process that a second signal ended: as a shell reports one the
    // signal killed (130 for Ctrl-C, 143 for SIGTERM).
    static constexpr int exitCodeFor(int signal) { return 128 + signal; }

private:
    void deliver();

    int m_pair[2] = { -1, -1 }; // [0] read by the notifier, [1] written by the handler
    std::unique_ptr<QSocketNotifier> m_notifier;
    std::function<void(int)> m_callback;
    bool m_delivered = false;
};

// The --help sentence on Ctrl-C: " Ctrl-C or SIGTERM " + what the first one does (`first`),
// then the second one's exit.
QString interruptHelp(const QString &first);

} // namespace scalelab::app

// Ctrl-C and SIGTERM for the long-running servers (`xtrain dashboard`, `xtrain serve`): the handler
// writes one byte to a self-pipe (async-signal-safe) and a thread blocked in wait_for_stop_signal()
// wakes to shut the server down cleanly. A SIGINT the parent ignores (a background job) stays ignored.
#pragma once

namespace xtrain::cli {

void install_stop_signal_handlers();  // idempotent; throws when the pipe cannot be made
void wait_for_stop_signal();          // returns once a signal (or raise_stop_signal) arrived
void raise_stop_signal();             // wakes the waiter without a signal: the server ended by itself

}  // namespace xtrain::cli

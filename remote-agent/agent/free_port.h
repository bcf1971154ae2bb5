// A TCP port for a run's rendezvous store, picked when StartWorkers leaves the rendezvous
// port to the agent that hosts rank 0. Its own file: advertise.h chooses the address once
// at start-up and listen_check.h diagnoses the agent's own gRPC listener, while this asks
// the kernel for a port each time a run starts. Stateless; safe from any thread.
#pragma once

namespace scalelab::agent {

// A port the kernel reports free right now (an IPv4 socket bound to 0.0.0.0 port 0, the
// port read back, the socket closed): the worker's TCPStore binds it moments later, so
// another process may take it in between. 0 when no socket could be bound.
int freeTcpPort();

} // namespace scalelab::agent

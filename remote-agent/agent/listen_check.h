// What scalelab-agent checks around starting its gRPC server, so that a refusal names
// the real cause instead of gRPC's one bit of "it did not work": the TLS files
// (readable PEM, the key belongs to the certificate) before the server is built, and,
// when the server could not listen, why a plain bind() of the same address fails (port
// in use, address not of this host, privileged port). Stateless; safe from any thread.
#pragma once

#include "status.h"

#include <string>

namespace scalelab::agent {

// Success, or what is wrong with a server certificate chain and its private key (PEM
// contents; the paths are only named in the message): not PEM, unparsable, an encrypted
// key, or a key that is not the certificate's. `warning` gets a sentence for a
// certificate that is expired or not yet valid (clients will refuse it; the agent runs).
common::Status checkTlsKeyPair(const std::string &certPem, const std::string &certPath,
    const std::string &keyPem, const std::string &keyPath, std::string *warning);

// Whether a PEM bundle of CA certificates given as `option` ("--tls-client-ca") is
// usable, and if not what is wrong with it.
common::Status checkCaBundle(const std::string &pem, const std::string &path, const std::string &option);

// Why a TCP listener on `host`:`port` cannot be set up, found by binding plain sockets
// to every address `host` resolves to, as gRPC does (SO_REUSEADDR, no SO_REUSEPORT):
// "port 7450 of 127.0.0.1 is in use ...", "... is not an address of this host ...".
// Succeeds when every bind works.
common::Status checkBind(const std::string &host, int port);

} // namespace scalelab::agent

// Where agents are, said one of three ways, the same in the CLI, the console and the
// deployment scripts:
//   HOST:PORT             one agent (repeatable: --agent)
//   a file                one HOST:PORT per line, '#' starts a comment (--agents-file; the
//                         Slurm launcher writes one)
//   dns:NAME:PORT         every address NAME resolves to (--agents; a Kubernetes headless
//                         Service), in sorted order; set SCALELAB_TLS_SERVER_NAME when the
//                         agents' certificates name the Service, not the pods' addresses
#pragma once

#include "core_status.h"

#include <QString>
#include <QStringList>

namespace scalelab::core {

// HOST:PORT, each once, in the order given, when every source was read and every address
// is usable; else what is wrong with the first source that is not (naming it).
using AgentAddresses = Result<QStringList>;

// The addresses in the text of an agents file; `source` names it in errors ("FILE:LINE: …").
[[nodiscard]] AgentAddresses parseAgentsFile(const QByteArray &text, const QString &source);

// Reads and parses an agents file.
[[nodiscard]] AgentAddresses readAgentsFile(const QString &path);

// "dns:NAME:PORT" → "ADDRESS:PORT" for every IPv4/IPv6 address of NAME (IPv6 in brackets),
// sorted; an error when the spec is malformed or NAME has no address.
[[nodiscard]] AgentAddresses resolveAgentsDns(const QString &spec);

// Whether one spec is well formed, and if not what is wrong with its form, without
// reading or resolving anything: for plan validation and for the console as the user types.
Status checkAgentSpec(const QString &spec);

// The addresses of specs, in order, each once; a relative file: path is read from
// `baseDir` (a plan's folder) when one is given. The first problem stops it.
[[nodiscard]] AgentAddresses resolveAgentSpecs(const QStringList &specs, const QString &baseDir = {});

// Everything given, in order: --agent values, then each --agents-file, then each --agents
// spec (any of the three forms). Duplicates are kept once. The first problem stops it.
[[nodiscard]] AgentAddresses gatherAgentAddresses(
    const QStringList &agents, const QStringList &files, const QStringList &specs);

} // namespace scalelab::core

// scalelab-agent's settings: every option comes from the command line, else from its
// environment variable, else from the config file (--config / SCALELAB_AGENT_CONFIG,
// "name = value" lines with the long option names), else from its default.
// Not thread-safe; used once at start-up.
#pragma once

#include "status.h"

#include <QCommandLineParser>
#include <QMap>
#include <QString>

#include <vector>

namespace scalelab::agent {

struct AgentSetting {
    QString name; // long option and config-file key, e.g. "listen"
    QString env; // e.g. "SCALELAB_AGENT_LISTEN"
    QString valueName; // empty = no value
    QString help;
    QString defaultValue; // shown in --help; empty = none
};

// Every option of scalelab-agent, in --help order.
const std::vector<AgentSetting> &agentSettings();

class AgentConfig {
public:
    // Registers the options (with their variables in the help text) on `parser`.
    void addOptions(QCommandLineParser *parser);
    // After parser.process(): reads the config file and resolves every value. Success,
    // or what is wrong (naming the file, line and key).
    common::Status resolve(const QCommandLineParser &parser);

    QString value(const QString &name) const { return m_values.value(name); }
    // Where the value came from: "command line", "SCALELAB_...", "FILE:LINE" or "default".
    QString source(const QString &name) const { return m_sources.value(name); }

private:
    QMap<QString, QString> m_values;
    QMap<QString, QString> m_sources;
};

} // namespace scalelab::agent

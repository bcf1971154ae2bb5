// What the console was started with: console_main.cpp fills it from the command line and
// the environment; MainWindow keeps a copy, and hands one to its Run tab (the agent to
// connect to, the form's presets, whether to launch at once).
// Thread: any (values only).
#pragma once

#include "local_agent.h"

#include <QString>
#include <QStringList>

namespace scalelab::app {

struct ConsoleOptions {
    QString agentEndpoint; // empty = start a local agent
    // Agents to add to the Agents tab (and its saved list) when not there yet, named by
    // their address, with `token` and the SCALELAB_TLS_* settings (--agents-file, ...).
    QStringList moreAgents;
    QString token;
    core::LocalAgentOptions localAgent;
    QString stateDir; // the study journal (journal.sqlite) and agents.json; empty = neither
    // Form presets; with launchWhenConnected the run starts as soon as the agent answers.
    // 0 (or empty) = as the form was left last time, else 1 worker, batch 64, 2 epochs.
    QString dataset;
    int workers = 0;
    int batchSize = 0;
    int epochs = 0;
    bool launchWhenConnected = false;
    // Studies: reattach at start-up to the study left unfinished (a console that was
    // killed mid-study picks it up again), or open this one.
    bool reopenStudies = true;
    QString openStudy;
    QString planFile; // loaded into the study designer
    bool launchStudyWhenConnected = false; // launch the designer's plan once an agent answers
    QString theme; // "system" | "light" | "dark"; empty = as last time
};

} // namespace scalelab::app

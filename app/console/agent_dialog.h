// Adds or edits one agent of the console's list: name, address, token (typed or read from
// a token file), TLS files, enabled. Problems show under the field they concern as the
// user types (fields not yet touched stay quiet until OK is pressed), in the registry's
// words; OK keeps the dialog open while any remain.
#pragma once

#include "agent_registry.h"

#include <QDialog>
#include <QSet>

class QCheckBox;
class QGroupBox;
class QLabel;
class QLineEdit;

namespace scalelab::console {

class AgentDialog : public QDialog {
    Q_OBJECT
public:
    // `registry` checks for duplicate names; `editing` is the index being edited (-1: new).
    AgentDialog(const core::AgentRegistry *registry, int editing, const core::AgentConfig &initial,
        QWidget *parent = nullptr);

    core::AgentConfig config() const; // as typed, trimmed; TLS fields only with TLS on
    QList<core::AgentProblem> problems() const;
    // Shows every problem (as OK does) and returns how many there are.
    int validateAll();

    void accept() override;

private:
    QLineEdit *fileRow(const QString &objectName, const QString &placeholder, QWidget **row);
    void validate();

    const core::AgentRegistry *m_registry;
    int m_editing;
    QSet<QString> m_touched; // fields whose problems are shown
    bool m_showAll = false;
    QLineEdit *m_name = nullptr;
    QLineEdit *m_address = nullptr;
    QLineEdit *m_token = nullptr;
    QGroupBox *m_tls = nullptr;
    QLineEdit *m_ca = nullptr;
    QLineEdit *m_cert = nullptr;
    QLineEdit *m_key = nullptr;
    QLineEdit *m_serverName = nullptr;
    QCheckBox *m_enabled = nullptr;
    QMap<QString, QLabel *> m_errors; // field -> its error label
};

} // namespace scalelab::console

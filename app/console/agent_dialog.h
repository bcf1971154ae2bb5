// Adds or edits one agent of the console's list: name, address, token (typed or read from
// a token file), TLS files, enabled. When adding, the address may also be file:PATH (an
// agents file, as the Slurm launcher writes) or dns:NAME:PORT (every address of NAME, as
// for a Kubernetes headless Service): then it adds one agent per address, each named by
// its address and sharing the token and TLS settings; the list is read when OK is pressed. Problems show
// under the field they concern as the user types (fields not yet touched stay quiet until OK is pressed), in
// the registry's words; OK keeps the dialog open while any remain.
#pragma once

#include "agent_registry.h"

#include <QDialog>
#include <QSet>

class QCheckBox;
class QFormLayout;
class QGroupBox;
class QLabel;
class QLayout;
class QLineEdit;

namespace scalelab::app {

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

    // The address is file:PATH or dns:NAME:PORT: several agents, named by their addresses.
    bool isList() const;
    // What the list resolved to when OK was pressed.
    QStringList addresses() const { return m_addresses; }

private:
    QLabel *errorLabel(const QString &field);
    QWidget *withError(QWidget *field, QLayout *fieldLayout, const QString &name);
    QLayout *buildTokenRow();
    QFormLayout *buildConnectionForm(bool adding);
    void buildTlsGroup(const core::AgentConfig &initial);
    void connectValidation();
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
    QString m_listError; // why the list could not be read, until the address changes
    QStringList m_addresses;
};

} // namespace scalelab::app

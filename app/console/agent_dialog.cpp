#include "agent_dialog.h"

#include "agent_addresses.h"
#include "theme.h"

#include <QCheckBox>
#include <QDialogButtonBox>
#include <QFile>
#include <QFileDialog>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QVBoxLayout>

namespace scalelab::app {

namespace {
QColor errorColor(const QPalette &palette)
{
    // Readable red on light and on dark backgrounds.
    return isDarkPalette(palette) ? QColor(0xff, 0x8a, 0x80) : QColor(0xc6, 0x28, 0x28);
}
} // namespace

AgentDialog::AgentDialog(
    const core::AgentRegistry *registry, int editing, const core::AgentConfig &initial, QWidget *parent)
    : QDialog(parent)
    , m_registry(registry)
    , m_editing(editing)
{
    setWindowTitle(editing < 0 ? tr("Add agent") : tr("Edit agent %1").arg(initial.name));
    setMinimumWidth(520);

    m_name = new QLineEdit(initial.name);
    m_name->setObjectName(QStringLiteral("nameEdit"));
    m_name->setPlaceholderText(tr("gpu-node-1"));
    m_address = new QLineEdit(initial.address);
    m_address->setObjectName(QStringLiteral("addressEdit"));
    m_address->setPlaceholderText(editing < 0 ? tr("host:port, or several: file:PATH or dns:NAME:PORT")
                                              : tr("host:port, e.g. gpu-node-1:50051"));
    m_address->setToolTip(
        tr("HOST:PORT of one agent. When adding, also file:PATH (one HOST:PORT per line, as "
           "the Slurm launcher writes agents.txt) or dns:NAME:PORT (every address NAME "
           "resolves to, e.g. a Kubernetes headless Service): one agent per address, named "
           "by it"));
    m_token = new QLineEdit(initial.token);
    auto *form = buildConnectionForm(editing < 0);
    buildTlsGroup(initial);

    m_enabled = new QCheckBox(tr("Connect to this agent"));
    m_enabled->setChecked(initial.enabled);
    m_enabled->setToolTip(tr("A disabled agent stays in the list but is not contacted"));

    auto *note = new QLabel(tr("Tokens are kept in the console's state folder, readable only by you."));
    note->setWordWrap(true);
    note->setEnabled(false); // the palette's secondary text colour

    auto *buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
    connect(buttons, &QDialogButtonBox::accepted, this, &AgentDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &AgentDialog::reject);

    auto *layout = new QVBoxLayout(this);
    layout->addLayout(form);
    layout->addWidget(m_tls);
    layout->addWidget(m_enabled);
    layout->addWidget(note);
    layout->addWidget(buttons);

    connectValidation();
    // Editing an entry that is already wrong: show what to fix at once.
    m_showAll = editing >= 0;
    validate();
}

// A field's error line, hidden until it has something to say.
QLabel *AgentDialog::errorLabel(const QString &field)
{
    auto *label = new QLabel;
    label->setObjectName(QStringLiteral("error:") + field);
    label->setWordWrap(true);
    QPalette p = label->palette();
    p.setColor(QPalette::WindowText, errorColor(palette()));
    label->setPalette(p);
    label->hide();
    m_errors.insert(field, label);
    return label;
}

// Each field with its error line right under it (hidden: no gap).
QWidget *AgentDialog::withError(QWidget *field, QLayout *fieldLayout, const QString &name)
{
    auto *cell = new QWidget;
    auto *v = new QVBoxLayout(cell);
    v->setContentsMargins(0, 0, 0, 0);
    v->setSpacing(2);
    if (field)
        v->addWidget(field);
    else
        v->addLayout(fieldLayout);
    v->addWidget(errorLabel(name));
    return cell;
}

// The token, typed (hidden unless shown) or read from the agent's token file.
QLayout *AgentDialog::buildTokenRow()
{
    m_token->setObjectName(QStringLiteral("tokenEdit"));
    m_token->setEchoMode(QLineEdit::Password);
    m_token->setPlaceholderText(tr("the agent's token (empty for a loopback agent without one)"));
    auto *showToken = new QCheckBox(tr("Show"));
    connect(showToken, &QCheckBox::toggled, this,
        [this](bool on) { m_token->setEchoMode(on ? QLineEdit::Normal : QLineEdit::Password); });
    auto *tokenFile = new QPushButton(tr("From file…"));
    tokenFile->setToolTip(tr("Read the token from the agent's token file"));
    connect(tokenFile, &QPushButton::clicked, this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, tr("Token file"));
        if (path.isEmpty())
            return;
        QFile f(path);
        if (f.open(QIODevice::ReadOnly)) {
            m_token->setText(QString::fromUtf8(f.readAll()).trimmed());
        } else {
            m_errors.value(QStringLiteral("token"))
                ->setText(tr("cannot read %1: %2").arg(path, f.errorString()));
            m_errors.value(QStringLiteral("token"))->show();
        }
    });
    auto *tokenRow = new QHBoxLayout;
    tokenRow->setContentsMargins(0, 0, 0, 0);
    tokenRow->addWidget(m_token, 1);
    tokenRow->addWidget(showToken);
    tokenRow->addWidget(tokenFile);
    return tokenRow;
}

// Name, address (when adding, also an agents file) and token.
QFormLayout *AgentDialog::buildConnectionForm(bool adding)
{
    auto *form = new QFormLayout;
    form->addRow(tr("Name"), withError(m_name, nullptr, QStringLiteral("name")));
    auto *addressRow = new QHBoxLayout;
    addressRow->setContentsMargins(0, 0, 0, 0);
    addressRow->addWidget(m_address, 1);
    if (adding) {
        auto *agentsFile = new QPushButton(tr("Agents file…"));
        agentsFile->setObjectName(QStringLiteral("agentsFileButton"));
        agentsFile->setToolTip(tr("Add every agent of a file of addresses (one HOST:PORT per line)"));
        connect(agentsFile, &QPushButton::clicked, this, [this] {
            const QString path = QFileDialog::getOpenFileName(this, tr("Agents file"));
            if (path.isEmpty())
                return;
            m_address->setText(QStringLiteral("file:") + path);
            Q_EMIT m_address->textEdited(m_address->text());
        });
        addressRow->addWidget(agentsFile);
    }
    form->addRow(tr("Address"), withError(nullptr, addressRow, QStringLiteral("address")));
    form->addRow(tr("Token"), withError(nullptr, buildTokenRow(), QStringLiteral("token")));
    return form;
}

// The CA, the client certificate and key (mutual TLS), and the name in the agent's certificate.
void AgentDialog::buildTlsGroup(const core::AgentConfig &initial)
{
    m_tls = new QGroupBox(tr("TLS (needed for an agent off this computer)"));
    m_tls->setObjectName(QStringLiteral("tlsGroup"));
    m_tls->setCheckable(true);
    m_tls->setChecked(!initial.tls.caFile.isEmpty() || !initial.tls.certFile.isEmpty());
    QWidget *caRow = nullptr, *certRow = nullptr, *keyRow = nullptr;
    m_ca = fileRow(
        QStringLiteral("caEdit"), tr("PEM file of the CA that signed the agent's certificate"), &caRow);
    m_ca->setText(initial.tls.caFile);
    m_cert = fileRow(QStringLiteral("certEdit"), tr("optional: client certificate (mutual TLS)"), &certRow);
    m_cert->setText(initial.tls.certFile);
    m_key = fileRow(QStringLiteral("keyEdit"), tr("optional: the client certificate's key"), &keyRow);
    m_key->setText(initial.tls.keyFile);
    m_serverName = new QLineEdit(initial.tls.serverName);
    m_serverName->setPlaceholderText(tr("optional: name in the agent's certificate, if not the host"));
    auto *tlsForm = new QFormLayout(m_tls);
    tlsForm->addRow(tr("CA file"), withError(caRow, nullptr, QStringLiteral("tls.ca")));
    tlsForm->addRow(tr("Client certificate"), withError(certRow, nullptr, QStringLiteral("tls.cert")));
    tlsForm->addRow(tr("Client key"), withError(keyRow, nullptr, QStringLiteral("tls.key")));
    tlsForm->addRow(tr("Server name"), m_serverName);
}

// A field's problems show once the user has touched it.
void AgentDialog::connectValidation()
{
    const auto touch = [this](const QString &field) {
        return [this, field] {
            m_touched.insert(field);
            validate();
        };
    };
    connect(m_name, &QLineEdit::textEdited, this, touch(QStringLiteral("name")));
    connect(m_address, &QLineEdit::textEdited, this, touch(QStringLiteral("address")));
    connect(m_address, &QLineEdit::textChanged, this, [this] {
        m_listError.clear();
        // Agents of a list are named by their addresses.
        m_name->setEnabled(!isList());
        m_name->setPlaceholderText(isList() ? tr("each agent is named by its address") : tr("gpu-node-1"));
        m_enabled->setText(isList() ? tr("Connect to these agents") : tr("Connect to this agent"));
    });
    connect(m_token, &QLineEdit::textChanged, this, touch(QStringLiteral("token")));
    connect(m_ca, &QLineEdit::textChanged, this, touch(QStringLiteral("tls.ca")));
    connect(m_cert, &QLineEdit::textChanged, this, touch(QStringLiteral("tls.cert")));
    connect(m_key, &QLineEdit::textChanged, this, touch(QStringLiteral("tls.key")));
    connect(m_tls, &QGroupBox::toggled, this, [this] {
        m_touched << QStringLiteral("tls.ca") << QStringLiteral("tls.cert") << QStringLiteral("tls.key");
        validate();
    });
}

QLineEdit *AgentDialog::fileRow(const QString &objectName, const QString &placeholder, QWidget **row)
{
    auto *edit = new QLineEdit;
    edit->setObjectName(objectName);
    edit->setPlaceholderText(placeholder);
    auto *browse = new QPushButton(tr("Browse…"));
    connect(browse, &QPushButton::clicked, this, [this, edit] {
        const QString path = QFileDialog::getOpenFileName(
            this, tr("Choose a PEM file"), edit->text(), tr("PEM files (*.pem *.crt *.key);;All files (*)"));
        if (!path.isEmpty())
            edit->setText(path);
    });
    *row = new QWidget;
    auto *layout = new QHBoxLayout(*row);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(edit, 1);
    layout->addWidget(browse);
    return edit;
}

core::AgentConfig AgentDialog::config() const
{
    core::AgentConfig c;
    c.name = m_name->text().trimmed();
    c.address = m_address->text().trimmed();
    c.token = m_token->text().trimmed();
    c.enabled = m_enabled->isChecked();
    if (m_tls->isChecked()) {
        c.tls.caFile = m_ca->text().trimmed();
        c.tls.certFile = m_cert->text().trimmed();
        c.tls.keyFile = m_key->text().trimmed();
        c.tls.serverName = m_serverName->text().trimmed();
    }
    return c;
}

bool AgentDialog::isList() const
{
    const QString address = m_address->text().trimmed();
    return m_editing < 0
        && (address.startsWith(QLatin1String("file:")) || address.startsWith(QLatin1String("dns:")));
}

QList<core::AgentProblem> AgentDialog::problems() const
{
    QList<core::AgentProblem> found;
    if (isList()) {
        // The shared settings, checked as for one agent; the name and the address are the list's.
        core::AgentConfig sample = config();
        sample.name = QStringLiteral("list");
        sample.address = QStringLiteral("list:1");
        for (const auto &p : core::AgentRegistry::problemsOf(sample))
            if (p.field != QLatin1String("name") && p.field != QLatin1String("address"))
                found << p;
        if (const QString problem = core::checkAgentSpec(config().address).error(); !problem.isEmpty())
            found << core::AgentProblem { QStringLiteral("address"), problem };
        else if (!m_listError.isEmpty())
            found << core::AgentProblem { QStringLiteral("address"), m_listError };
    } else {
        found = m_registry ? m_registry->problems(config(), m_editing)
                           : core::AgentRegistry::problemsOf(config());
    }
    if (m_tls->isChecked() && m_ca->text().trimmed().isEmpty()
        && std::none_of(
            found.begin(), found.end(), [](const auto &p) { return p.field == QLatin1String("tls.ca"); }))
        found << core::AgentProblem { QStringLiteral("tls.ca"),
            tr("TLS: choose the CA file that signed the agent's certificate, or turn TLS off") };
    return found;
}

void AgentDialog::validate()
{
    QMap<QString, QStringList> byField;
    for (const auto &p : problems())
        byField[p.field] << p.message;
    for (auto it = m_errors.begin(); it != m_errors.end(); ++it) {
        const QStringList messages = byField.value(it.key());
        const bool show = !messages.isEmpty() && (m_showAll || m_touched.contains(it.key()));
        it.value()->setText(messages.join(QLatin1Char('\n')));
        it.value()->setVisible(show);
    }
}

int AgentDialog::validateAll()
{
    m_showAll = true;
    validate();
    return int(problems().size());
}

void AgentDialog::accept()
{
    m_listError.clear(); // the list is read again
    if (validateAll() != 0)
        return;
    if (isList()) {
        // Read the file or ask DNS now, once: the user sees what the list holds, or why not.
        const core::AgentAddresses listed = core::resolveAgentSpecs({ config().address });
        if (!listed.ok()) {
            m_listError = listed.error();
            validateAll();
            return;
        }
        m_addresses = *listed;
    }
    QDialog::accept();
}

} // namespace scalelab::app

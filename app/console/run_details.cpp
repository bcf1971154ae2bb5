#include "run_details.h"

#include "journal.h"
#include "journal_reader.h"
#include "progress_meter.h"
#include "run_record.h"
#include "study_model.h"

#include <QDateTime>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFontDatabase>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QRegularExpression>
#include <QSaveFile>
#include <QSplitter>
#include <QTableWidget>
#include <QTextCursor>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

namespace scalelab::app {
namespace {

QString timeOf(qint64 unixMs)
{
    return unixMs > 0 ? QDateTime::fromMSecsSinceEpoch(unixMs).toString(QStringLiteral("yyyy-MM-dd hh:mm:ss"))
                      : QString();
}

// What an attempt trains with, as the worker reports it: enough to rerun it.
QString startedLine(const v1::RunStarted &st)
{
    const auto &r = st.effective();
    QString text = st.resumed_from_epoch() > 0
        ? QStringLiteral("started: %1 rank(s), resumed after epoch %2")
              .arg(st.world_size())
              .arg(st.resumed_from_epoch())
        : QStringLiteral("started: %1 rank(s), from scratch").arg(st.world_size());
    text
        += QStringLiteral(" · batch %1/rank (global %2) · lr %3 (peak %4, %5, warm-up %6 steps) · momentum %7"
                          " · weight decay %8 · seed %9")
               .arg(r.batch_size())
               .arg(st.global_batch())
               .arg(r.learning_rate())
               .arg(st.peak_learning_rate())
               .arg(QString::fromStdString(r.schedule().empty() ? "cosine" : r.schedule()))
               .arg(st.warmup_steps())
               .arg(r.momentum())
               .arg(r.weight_decay())
               .arg(r.seed());
    text += QStringLiteral(" · %1 thread(s)/rank on %2 · %3 steps/epoch · %4 train / %5 test images%6")
                .arg(st.threads())
                .arg(QString::fromStdString(st.device()))
                .arg(st.steps_per_epoch())
                .arg(st.dataset().train_images())
                .arg(st.dataset().test_images())
                .arg(st.dataset().synthetic() ? QStringLiteral(" (SYNTHETIC)") : QString());
    if (const auto &f = r.finetune(); f.head_epochs() > 0)
        text += QStringLiteral(" · fine-tuning: epochs 1-%1 train the head (%2) alone at lr %3, the whole "
                               "model after")
                    .arg(f.head_epochs())
                    .arg(QString::fromStdString(f.head()))
                    .arg(f.head_learning_rate());
    const auto software = st.software();
    if (const auto torch = software.find("torch"); torch != software.end())
        text += QStringLiteral(" · torch %1").arg(QString::fromStdString(torch->second));
    if (const auto blas = software.find("blas"); blas != software.end())
        text += QStringLiteral(", %1").arg(QString::fromStdString(blas->second));
    return text;
}

QString rankExitLine(const v1::RankExit &x)
{
    QString how;
    switch (x.kind()) {
    case v1::EXIT_SUCCEEDED:
        how = QStringLiteral("succeeded");
        break;
    case v1::EXIT_KILLED:
        how = QStringLiteral("killed by signal %1").arg(x.signal());
        break;
    case v1::EXIT_OUT_OF_MEMORY:
        how = QStringLiteral("out of memory");
        break;
    case v1::EXIT_STOPPED:
        how = QStringLiteral("stopped");
        break;
    case v1::EXIT_DIVERGED:
        how = QStringLiteral("diverged");
        break;
    default:
        how = QStringLiteral("failed with exit code %1").arg(x.exit_code());
    }
    return QStringLiteral("rank %1 exited: %2%3")
        .arg(x.rank())
        .arg(how,
            x.message().empty() ? QString() : QStringLiteral(" — ") + QString::fromStdString(x.message()));
}

QString summaryLine(const v1::RunSummary &x)
{
    QString text = QStringLiteral("summary: %1").arg(core::RunRecord::stateName(x.state()));
    if (x.epochs_completed() > 0)
        text += QStringLiteral(" after %1 epoch(s) · final test accuracy %2% (best %3%) · %4 img/s · %5 s")
                    .arg(x.epochs_completed())
                    .arg(x.final_test_accuracy() * 100, 0, 'f', 1)
                    .arg(x.best_test_accuracy() * 100, 0, 'f', 1)
                    .arg(x.images_per_second(), 0, 'f', 1)
                    .arg(x.wall_seconds(), 0, 'f', 1);
    if (!x.weights_sha256().empty())
        text += QStringLiteral(" · weights sha256 %1…")
                    .arg(QString::fromStdString(x.weights_sha256().substr(0, 12)));
    if (!x.message().empty())
        text += QStringLiteral(" — ") + QString::fromStdString(x.message());
    return text;
}

// One line of the run's log for an event: what happened, what the attempt trains with,
// each epoch's metrics and the outcome; empty for per-step metrics (they are on the charts).
QString logLine(const v1::RunEvent &e)
{
    const QString rank = QStringLiteral("rank %1").arg(e.rank());
    if (e.has_log())
        return QStringLiteral("%1 %2%3").arg(rank,
            e.log().stream() == "output" ? QString()
                                         : QString::fromStdString(e.log().stream()) + QStringLiteral(": "),
            QString::fromStdString(e.log().text()));
    if (e.has_state())
        return QStringLiteral("state %1%2")
            .arg(core::RunRecord::stateName(e.state().state()),
                e.state().message().empty()
                    ? QString()
                    : QStringLiteral(": ") + QString::fromStdString(e.state().message()));
    if (e.has_started())
        return startedLine(e.started());
    if (e.has_epoch()) {
        const auto &x = e.epoch();
        return QStringLiteral(
            "epoch %1: train loss %2, accuracy %3% · test loss %4, accuracy %5% · %6 img/s, %7 s")
            .arg(x.epoch())
            .arg(x.train_loss(), 0, 'f', 4)
            .arg(x.train_accuracy() * 100, 0, 'f', 1)
            .arg(x.test_loss(), 0, 'f', 4)
            .arg(x.test_accuracy() * 100, 0, 'f', 1)
            .arg(x.images_per_second(), 0, 'f', 1)
            .arg(x.epoch_seconds(), 0, 'f', 1);
    }
    if (e.has_checkpoint())
        return QStringLiteral("checkpoint of epoch %1 committed").arg(e.checkpoint().epoch());
    if (e.has_rank_exited())
        return rankExitLine(e.rank_exited());
    if (e.has_summary())
        return summaryLine(e.summary());
    return {};
}

QTableWidgetItem *readOnlyCell(const QString &text)
{
    auto *item = new QTableWidgetItem(text);
    item->setFlags(item->flags() & ~Qt::ItemIsEditable);
    return item;
}

} // namespace

RunDetails::RunDetails(JournalReader &reader, const QString &runId,
    std::function<bool(core::RunResult *)> lookup, QWidget *parent)
    : QDialog(parent)
    , m_reader(reader)
    , m_runId(runId)
    , m_lookup(std::move(lookup))
{
    setWindowTitle(tr("Run %1").arg(runId));
    setAttribute(Qt::WA_DeleteOnClose);
    resize(900, 600);
    m_header = new QLabel;
    m_header->setWordWrap(true);
    m_header->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_progress = new QProgressBar;
    m_progress->setObjectName(QStringLiteral("runDetailsProgress"));
    m_progress->setRange(0, 1000);
    m_progress->setTextVisible(true);
    m_attempts = new QTableWidget(0, 8);
    m_attempts->setHorizontalHeaderLabels({ tr("Attempt"), tr("Agents"), tr("Workers"), tr("Outcome"),
        tr("Resumed after epoch"), tr("Started"), tr("Ended"), tr("Why it ended") });
    m_attempts->verticalHeader()->hide();
    m_attempts->horizontalHeader()->setStretchLastSection(true);
    m_log = new QPlainTextEdit;
    m_log->setObjectName(QStringLiteral("runLog"));
    m_log->setReadOnly(true);
    m_log->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    m_log->setMaximumBlockCount(100'000);
    m_filter = new QLineEdit;
    m_filter->setObjectName(QStringLiteral("runLogFilter"));
    m_filter->setPlaceholderText(tr("Show only log lines containing… (rank 1, error, epoch 3, …)"));
    m_filter->setClearButtonEnabled(true);
    connect(m_filter, &QLineEdit::textChanged, this, &RunDetails::setLogFilter);
    auto *logBox = new QWidget;
    auto *logLayout = new QVBoxLayout(logBox);
    logLayout->setContentsMargins(0, 0, 0, 0);
    logLayout->addWidget(m_filter);
    logLayout->addWidget(m_log, 1);
    auto *split = new QSplitter(Qt::Vertical);
    split->addWidget(m_attempts);
    split->addWidget(logBox);
    split->setSizes({ 150, 450 });

    auto *buttons = new QDialogButtonBox(QDialogButtonBox::Close);
    m_retry = buttons->addButton(tr("&Retry run"), QDialogButtonBox::ActionRole);
    m_retry->setToolTip(tr("One more attempt of this FAILED or CANCELLED run, from its last checkpoint"));
    m_cancel = buttons->addButton(tr("&Cancel run"), QDialogButtonBox::ActionRole);
    QPushButton *save = buttons->addButton(tr("&Save log…"), QDialogButtonBox::ActionRole);
    save->setToolTip(tr("Write the whole log (every rank, every attempt) to a text file"));
    connect(save, &QPushButton::clicked, this, [this] {
        const QString path = QFileDialog::getSaveFileName(this, tr("Save the log of %1").arg(m_runId),
            m_runId + QStringLiteral(".log"), tr("Text (*.log *.txt)"));
        if (path.isEmpty())
            return;
        if (const core::Status saved = saveLog(path); !saved)
            QMessageBox::warning(this, tr("Log not saved"), saved.error());
    });
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    connect(m_retry, &QPushButton::clicked, this, [this] { Q_EMIT retryRequested(m_runId); });
    connect(m_cancel, &QPushButton::clicked, this, [this] { Q_EMIT cancelRequested(m_runId); });

    auto *layout = new QVBoxLayout(this);
    layout->addWidget(m_header);
    layout->addWidget(m_progress);
    layout->addWidget(split, 1);
    layout->addWidget(buttons);

    m_timer.setInterval(1000);
    connect(&m_timer, &QTimer::timeout, this, &RunDetails::refresh);
    m_timer.start();
    refresh();
}

void RunDetails::setLogFilter(const QString &text)
{
    if (m_filter->text() != text) {
        m_filter->setText(text); // comes back here through textChanged
        return;
    }
    // One document built at once (line by line would freeze on a long log), at most the
    // view's limit of the latest matching lines.
    QStringList shown;
    for (const QString &line : std::as_const(m_lines))
        if (text.isEmpty() || line.contains(text, Qt::CaseInsensitive))
            shown << line;
    if (shown.size() > m_log->maximumBlockCount())
        shown.remove(0, shown.size() - m_log->maximumBlockCount());
    m_log->setPlainText(shown.join(QLatin1Char('\n')));
    m_log->moveCursor(QTextCursor::End);
}

core::Status RunDetails::saveLog(const QString &path) const
{
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly | QIODevice::Text)) {
        return core::Status::failure(tr("cannot write %1: %2").arg(path, file.errorString()));
    }
    file.write(m_lines.join(QLatin1Char('\n')).toUtf8() + '\n');
    if (!file.commit()) {
        return core::Status::failure(tr("cannot write %1: %2").arg(path, file.errorString()));
    }
    return core::Status::success();
}

void RunDetails::setProgressSource(std::function<std::optional<core::ProgressView>()> progress)
{
    m_progressSource = std::move(progress);
    refresh();
}

void RunDetails::appendLogLine(const QString &line)
{
    // The view keeps 100,000 lines; the filter and Save log look at up to twice that.
    if (m_lines.size() >= 2 * m_log->maximumBlockCount())
        m_lines.remove(0, m_log->maximumBlockCount());
    m_lines << line;
    if (m_filter->text().isEmpty() || line.contains(m_filter->text(), Qt::CaseInsensitive))
        m_log->appendPlainText(line);
}

void RunDetails::refresh()
{
    core::RunResult run;
    if (!m_lookup(&run)) {
        m_header->setText(tr("Run %1 is not in the open study any more.").arg(m_runId));
        m_retry->setEnabled(false);
        m_cancel->setEnabled(false);
        return;
    }
    m_header->setText(
        tr("<b>%1</b> — %2<br>%3%4")
            .arg(m_runId.toHtmlEscaped(), run.state, run.config.key().toHtmlEscaped(),
                run.stateReason.isEmpty() ? QString()
                                          : QStringLiteral("<br>") + run.stateReason.toHtmlEscaped()));
    const bool ended = run.state == QLatin1String("FAILED") || run.state == QLatin1String("CANCELLED");
    m_retry->setEnabled(ended);
    m_cancel->setEnabled(!ended && run.state != QLatin1String("SUCCEEDED"));
    // Progress: live from the view's meter while it trains, else epochs done of planned.
    const std::optional<core::ProgressView> live = m_progressSource ? m_progressSource() : std::nullopt;
    if (live && run.state == QLatin1String("RUNNING") && live->stepsTotal > 0) {
        m_progress->setValue(int(live->fraction * 1000));
        m_progress->setFormat(
            tr("epoch %1/%2 · step %3/%4 · %5% · %6")
                .arg(live->epoch)
                .arg(live->epochs)
                .arg(live->stepInEpoch)
                .arg(live->stepsPerEpoch)
                .arg(int(std::floor(live->fraction * 100)))
                .arg(live->etaSeconds ? tr("ETA %1").arg(core::formatDuration(*live->etaSeconds))
                                      : tr("ETA once the step rate is measured")));
    } else {
        const int planned = run.config.epochs;
        const int done = int(run.epochs.size());
        m_progress->setValue(planned > 0 ? done * 1000 / planned : 0);
        m_progress->setFormat(tr("%1/%2 epochs trained").arg(done).arg(planned));
    }

    m_attempts->setRowCount(int(run.attempts.size()));
    for (int i = 0; i < run.attempts.size(); ++i) {
        const core::AttemptRecord &a = run.attempts[i];
        m_attempts->setItem(i, 0, readOnlyCell(QString::number(a.attempt)));
        m_attempts->setItem(i, 1, readOnlyCell(a.agents.join(QLatin1String(", "))));
        // An elastic run's attempt on another size says so, and why in its tooltip.
        QString size = a.worldSize > 0 ? QString::number(a.worldSize) : QString();
        if (!a.resize.isEmpty())
            size = tr("%1 (resized)").arg(size);
        QTableWidgetItem *workers = readOnlyCell(size);
        workers->setToolTip(a.resize);
        m_attempts->setItem(i, 2, workers);
        m_attempts->setItem(i, 3, readOnlyCell(a.outcome));
        m_attempts->setItem(i, 4,
            readOnlyCell(a.resumedFromEpoch > 0 ? QString::number(a.resumedFromEpoch) : tr("fresh start")));
        m_attempts->setItem(i, 5, readOnlyCell(timeOf(a.startedUnixMs)));
        m_attempts->setItem(i, 6, readOnlyCell(timeOf(a.endedUnixMs)));
        m_attempts->setItem(i, 7, readOnlyCell(a.reason));
    }
    m_attempts->resizeColumnsToContents();

    readLog(run);
}

void RunDetails::readLog(const core::RunResult &run)
{
    if (m_logReading)
        return; // the next tick reads what this one would have
    m_logReading = true;
    QList<std::pair<int, QStringList>> sources; // attempt, its agents
    for (const core::AttemptRecord &a : run.attempts)
        sources.append({ a.attempt, a.agents });
    m_reader.read(
        this,
        [runId = m_runId, sources, positions = m_lastSeq](const core::Journal &journal) {
            LogRead read { positions, {} };
            // New log lines of every attempt and agent, in the order the agents recorded them.
            for (const auto &[attempt, agents] : sources) {
                QList<std::pair<qint64, QString>> lines;
                for (const QString &agent : agents) {
                    const QString key = QStringLiteral("%1/%2").arg(attempt).arg(agent);
                    for (const auto &e : journal.runEvents(runId, attempt, agent, positions.value(key))) {
                        read.positions[key] = std::max<qint64>(read.positions.value(key), e.seq());
                        if (const QString text = logLine(e); !text.isEmpty())
                            lines.append({ e.unix_ms(),
                                QStringLiteral("%1  attempt %2  %3  %4")
                                    .arg(QDateTime::fromMSecsSinceEpoch(e.unix_ms())
                                             .toString(QStringLiteral("hh:mm:ss.zzz")))
                                    .arg(attempt)
                                    .arg(agent, text) });
                    }
                }
                std::stable_sort(lines.begin(), lines.end(),
                    [](const auto &x, const auto &y) { return x.first < y.first; });
                for (const auto &line : std::as_const(lines))
                    read.lines << line.second;
            }
            return read;
        },
        [this, command = run.workerCommand](const LogRead &read) {
            m_logReading = false;
            m_lastSeq = read.positions;
            for (const QString &line : read.lines)
                appendLogLine(line);
            showWorkerCommand(command);
        });
}

void RunDetails::showWorkerCommand(const QStringList &command)
{
    // The exact command rank 0's worker ran, once known (and again if a new attempt differs).
    if (command.isEmpty() || command == m_commandShown)
        return;
    m_commandShown = command;
    // Quoted as a POSIX shell reads it, so the line can be pasted into one.
    static const QRegularExpression plain(QStringLiteral("^[A-Za-z0-9_@%+=:,./-]+$"));
    QStringList quoted;
    for (const QString &arg : command)
        quoted << (plain.match(arg).hasMatch() ? arg
                                               : QLatin1Char('\'')
                    + QString(arg).replace(QLatin1Char('\''), QLatin1String("'\\''")) + QLatin1Char('\''));
    appendLogLine(tr("worker command (rank 0): %1").arg(quoted.join(QLatin1Char(' '))));
}

} // namespace scalelab::app

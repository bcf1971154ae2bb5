#include "lr_find_dialog.h"

#include "agent_client.h"

#include <QChart>
#include <QChartView>
#include <QDialogButtonBox>
#include <QLabel>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QPushButton>
#include <QVBoxLayout>
#include <QValueAxis>

#include <cmath>

namespace scalelab::app {

LrFindDialog::LrFindDialog(
    const core::AgentEndpoint &agent, const v1::FindLearningRateRequest &request, QWidget *parent)
    : QDialog(parent)
{
    setWindowTitle(tr("Learning-rate range test"));
    setObjectName(QStringLiteral("lrFindDialog"));
    resize(760, 520);
    m_chart = new QChart;
    m_chart->setTitle(tr("Smoothed training loss against the learning rate (batch %1, %2 steps)")
                          .arg(request.spec().batch_size())
                          .arg(request.steps() > 0 ? request.steps() : 200));
    m_raw = new QLineSeries;
    m_raw->setName(tr("loss per step"));
    m_smoothed = new QLineSeries;
    m_smoothed->setName(tr("smoothed (EMA 0.98)"));
    m_marker = new QLineSeries;
    m_marker->setName(tr("suggested"));
    QPen faint = m_raw->pen();
    faint.setColor(palette().color(QPalette::Mid));
    faint.setWidthF(1);
    m_raw->setPen(faint);
    QPen strong = m_smoothed->pen();
    strong.setWidthF(2.2);
    m_smoothed->setPen(strong);
    QPen dashed = m_marker->pen();
    dashed.setStyle(Qt::DashLine);
    dashed.setColor(QColor(0xB4, 0x53, 0x09));
    m_marker->setPen(dashed);
    for (QLineSeries *s : { m_raw, m_smoothed, m_marker })
        m_chart->addSeries(s);
    m_x = new QLogValueAxis;
    m_x->setBase(10);
    m_x->setLabelFormat(QStringLiteral("%.0e"));
    m_x->setTitleText(tr("Learning rate (log scale)"));
    m_x->setRange(
        request.min_lr() > 0 ? request.min_lr() : 1e-5, request.max_lr() > 0 ? request.max_lr() : 10);
    m_y = new QValueAxis;
    m_y->setTitleText(tr("Training loss"));
    m_y->setLabelFormat(QStringLiteral("%.2f"));
    m_chart->addAxis(m_x, Qt::AlignBottom);
    m_chart->addAxis(m_y, Qt::AlignLeft);
    for (QLineSeries *s : { m_raw, m_smoothed, m_marker }) {
        s->attachAxis(m_x);
        s->attachAxis(m_y);
    }
    auto *view = new QChartView(m_chart);
    view->setRenderHint(QPainter::Antialiasing);
    m_status = new QLabel(tr("Starting the range test on %1…").arg(agent.name));
    m_status->setWordWrap(true);
    m_status->setObjectName(QStringLiteral("lrFindStatus"));
    auto *buttons = new QDialogButtonBox(QDialogButtonBox::Close);
    m_use = buttons->addButton(tr("Use the suggestion"), QDialogButtonBox::AcceptRole);
    m_use->setEnabled(false);
    connect(m_use, &QPushButton::clicked, this, [this] {
        Q_EMIT chosen(m_suggested);
        accept();
    });
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    auto *layout = new QVBoxLayout(this);
    layout->addWidget(view, 1);
    layout->addWidget(m_status);
    layout->addWidget(buttons);

    // The call blocks; it runs on its own thread and posts what arrives to this one.
    m_thread = std::thread([this, agent, request] {
        core::AgentClient client(agent.address, agent.token, agent.tls.orEnvironment());
        v1::LrFindResult result;
        const core::Status call = client.findLearningRate(
            request,
            [this](const v1::LrFindProgress &progress) {
                QList<QPointF> smoothed, raw;
                for (const auto &p : progress.points())
                    if (p.learning_rate() > 0 && std::isfinite(p.smoothed_loss())) {
                        smoothed << QPointF(p.learning_rate(), p.smoothed_loss());
                        if (std::isfinite(p.loss()))
                            raw << QPointF(p.learning_rate(), p.loss());
                    }
                QMetaObject::invokeMethod(
                    this, [this, smoothed, raw] { addPoints(smoothed, raw); }, Qt::QueuedConnection);
                return !m_cancel.load();
            },
            &result);
        if (m_cancel)
            return;
        QMetaObject::invokeMethod(
            this, [this, call, result] { finish(call.ok(), call.error(), result); }, Qt::QueuedConnection);
    });
}

LrFindDialog::~LrFindDialog()
{
    m_cancel = true; // the agent stops the worker when the call is cancelled
    if (m_thread.joinable())
        m_thread.join();
}

QString LrFindDialog::statusText() const
{
    return m_status->text();
}

void LrFindDialog::addPoints(const QList<QPointF> &smoothed, const QList<QPointF> &raw)
{
    if (smoothed.isEmpty())
        return;
    if (m_points == 0)
        m_first = m_lowest = smoothed.first().y();
    for (const QPointF &p : smoothed)
        m_lowest = std::min(m_lowest, p.y());
    m_points += int(smoothed.size());
    m_smoothed->append(smoothed);
    m_raw->append(raw);
    // Keep the fall readable: up to 2.5x the distance from the lowest to the start above it.
    const double top = m_first + 1.5 * std::max(0.05, m_first - m_lowest);
    m_y->setRange(std::max(0.0, m_lowest - 0.1 * std::max(0.05, m_first - m_lowest)), top);
    m_status->setText(tr("%1 steps: lr %2, smoothed loss %3")
                          .arg(m_points)
                          .arg(smoothed.last().x(), 0, 'g', 3)
                          .arg(smoothed.last().y(), 0, 'f', 3));
}

void LrFindDialog::finish(bool ok, const QString &error, const v1::LrFindResult &result)
{
    if (m_thread.joinable())
        m_thread.join();
    if (!ok) {
        m_status->setText(tr("The range test failed: %1").arg(error));
        Q_EMIT done(false);
        return;
    }
    m_suggested = result.suggested_learning_rate();
    m_marker->append({ QPointF(m_suggested, m_y->min()), QPointF(m_suggested, m_y->max()) });
    m_use->setText(tr("Use %1").arg(m_suggested, 0, 'g', 3));
    m_use->setEnabled(true);
    m_status->setText(tr("Suggested learning rate %1 for batch %2: %3. Lowest smoothed loss at lr %4%5.")
                          .arg(m_suggested, 0, 'g', 4)
                          .arg(result.batch_size())
                          .arg(QString::fromStdString(result.rule()))
                          .arg(result.min_loss_learning_rate(), 0, 'g', 4)
                          .arg(result.stopped_early() ? tr("; stopped when the loss diverged") : QString())
        + (result.conclusive() ? QString()
                               : tr("\nInconclusive: %1.").arg(QString::fromStdString(result.note()))));
    Q_EMIT done(true);
}

} // namespace scalelab::app

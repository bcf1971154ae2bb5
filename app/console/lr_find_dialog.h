// The learning-rate range test from the console: runs Agent.FindLearningRate on one agent,
// draws the smoothed loss against the learning rate (log axis) as the points arrive, marks
// the suggestion, and hands the chosen value back ("Use 0.02").
#pragma once

#include "scalelab/v1/agent.pb.h"
#include "study_runner.h"

#include <QDialog>

#include <atomic>
#include <thread>

class QChart;
class QLabel;
class QLineSeries;
class QLogValueAxis;
class QPushButton;
class QValueAxis;

namespace scalelab::app {

class LrFindDialog : public QDialog {
    Q_OBJECT
public:
    LrFindDialog(const core::AgentEndpoint &agent, const v1::FindLearningRateRequest &request,
        QWidget *parent = nullptr);
    ~LrFindDialog() override;

    double suggested() const { return m_suggested; }
    int pointCount() const { return m_points; }
    QString statusText() const;

Q_SIGNALS:
    void chosen(double learningRate);
    void done(bool ok); // the test ended (ok) or failed

private:
    void addPoints(const QList<QPointF> &smoothed, const QList<QPointF> &raw);
    void finish(bool ok, const QString &error, const v1::LrFindResult &result);

    QChart *m_chart = nullptr;
    QLineSeries *m_smoothed = nullptr;
    QLineSeries *m_raw = nullptr;
    QLineSeries *m_marker = nullptr;
    QLogValueAxis *m_x = nullptr;
    QValueAxis *m_y = nullptr;
    QLabel *m_status = nullptr;
    QPushButton *m_use = nullptr;
    double m_suggested = 0;
    double m_lowest = 0, m_first = 0;
    int m_points = 0;
    std::atomic<bool> m_cancel { false };
    std::thread m_thread;
};

} // namespace scalelab::app

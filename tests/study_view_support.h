// The agent the study panel's tests launch on (tst_study_view, tst_study_view_runs).
#pragma once

#include "agent_fixture.h"

#include <QTableWidget>

namespace scalelab::test {

// The text of a table's cell; empty where there is no item.
inline QString cell(QTableWidget *table, int row, int column)
{
    const auto *item = table->item(row, column);
    return item ? item->text() : QString();
}

// Starts `fixture`'s local agent (state folder "agent") and gives it a SYNTHETIC data set
// "synth" of 128 training and 64 test images.
[[nodiscard]] inline core::Status startAgentWithSynth(AgentFixture &fixture)
{
    AgentFixtureOptions options;
    options.stateName = QStringLiteral("agent");
    if (core::Status started = fixture.start(options); !started)
        return started;
    v1::CreateSyntheticDatasetRequest request;
    request.set_name("synth");
    request.set_train_images(128);
    request.set_test_images(64);
    v1::Dataset dataset;
    return fixture.client().createSyntheticDataset(request, &dataset);
}

} // namespace scalelab::test

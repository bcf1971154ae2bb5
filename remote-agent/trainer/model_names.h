// The built-in models by name, torch-free (the worker's options check them; model_zoo.h
// builds them).
#pragma once

#include <array>
#include <string_view>

namespace scalelab::trainer {

inline constexpr std::string_view kDefaultModel = "seed-cnn";
inline constexpr std::array<std::string_view, 3> kModelNames = { "seed-cnn", "resnet18", "mobilenet_v2" };

inline bool isModelName(std::string_view name)
{
    for (const auto known : kModelNames)
        if (known == name)
            return true;
    return false;
}

} // namespace scalelab::trainer

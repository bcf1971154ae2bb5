#include "cpu_features.h"

#include <fstream>
#include <sstream>
#include <string>

namespace scalelab::trainer::cpu {

bool hasBf16()
{
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line;
    while (std::getline(cpuinfo, line))
        if (line.rfind("flags", 0) == 0)
            return line.find(" avx512_bf16") != std::string::npos
                || line.find(" amx_bf16") != std::string::npos;
    return false;
}

bool hasFlags(const char *flags)
{
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line;
    while (std::getline(cpuinfo, line))
        if (line.rfind("flags", 0) == 0) {
            line += ' ';
            std::istringstream wanted(flags);
            std::string flag;
            while (wanted >> flag)
                if (line.find(' ' + flag + ' ') == std::string::npos)
                    return false;
            return true;
        }
    return false;
}

} // namespace scalelab::trainer::cpu

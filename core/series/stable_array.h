// An append-only array whose elements never move once they are past its first block.
//
// A std::vector that doubles copies everything it holds each time it fills: for a live
// chart series of 1,000,000 samples (six columns of doubles) that is ~50 MB copied and
// as much fresh memory touched, ~25 ms in one frame, and runs that start together cross
// the boundary together. Here the first block grows like a vector up to kBlock elements
// (so a ten-point series stays small) and every later block is allocated at its full
// size and never reallocated: an append costs O(1) always, not amortized.
//
// Indexing is a shift and a mask; iterators are random access, so <algorithm>'s binary
// searches work on it directly. Not thread-safe (one owner, like std::vector).
#pragma once

#include <cassert>
#include <cstddef>
#include <iterator>
#include <vector>

namespace scalelab::core {

template <typename T> class StableArray {
public:
    static constexpr std::size_t kShift = 16;
    static constexpr std::size_t kBlock = std::size_t(1) << kShift; // elements per block

    class const_iterator {
    public:
        using iterator_category = std::random_access_iterator_tag;
        using value_type = T;
        using difference_type = std::ptrdiff_t;
        using pointer = const T *;
        using reference = const T &;

        const_iterator() = default;
        const_iterator(const StableArray *array, std::size_t index)
            : m_array(array)
            , m_index(index)
        { }
        reference operator*() const { return (*m_array)[m_index]; }
        pointer operator->() const { return &(*m_array)[m_index]; }
        reference operator[](difference_type n) const
        {
            return (*m_array)[std::size_t(difference_type(m_index) + n)];
        }
        const_iterator &operator++() { return ++m_index, *this; }
        const_iterator operator++(int) { return { m_array, m_index++ }; }
        const_iterator &operator--() { return --m_index, *this; }
        const_iterator operator--(int) { return { m_array, m_index-- }; }
        const_iterator &operator+=(difference_type n)
        {
            return m_index = std::size_t(difference_type(m_index) + n), *this;
        }
        const_iterator &operator-=(difference_type n) { return *this += -n; }
        friend const_iterator operator+(const_iterator it, difference_type n) { return it += n; }
        friend const_iterator operator+(difference_type n, const_iterator it) { return it += n; }
        friend const_iterator operator-(const_iterator it, difference_type n) { return it -= n; }
        friend difference_type operator-(const const_iterator &a, const const_iterator &b)
        {
            return difference_type(a.m_index) - difference_type(b.m_index);
        }
        friend bool operator==(const const_iterator &a, const const_iterator &b)
        {
            return a.m_index == b.m_index;
        }
        friend auto operator<=>(const const_iterator &a, const const_iterator &b)
        {
            return a.m_index <=> b.m_index;
        }
        std::size_t index() const { return m_index; }

    private:
        const StableArray *m_array = nullptr;
        std::size_t m_index = 0;
    };

    void push_back(const T &value)
    {
        if (m_blocks.empty() || m_blocks.back().size() == kBlock) {
            m_blocks.emplace_back();
            if (m_blocks.size() > 1)
                m_blocks.back().reserve(kBlock); // never grows again: nothing in it moves
        }
        m_blocks.back().push_back(value);
        ++m_size;
    }
    // Rewrites element i in place (a series re-derived from its samples keeps its storage).
    void set(std::size_t i, const T &value)
    {
        assert(i < m_size);
        m_blocks[i >> kShift][i & (kBlock - 1)] = value;
    }
    // Element i's address; the elements from i to the end of its block (a multiple of
    // kBlock) are contiguous, so a run of 2^k elements starting at a multiple of 2^k is.
    T *data(std::size_t i)
    {
        assert(i < m_size);
        return m_blocks[i >> kShift].data() + (i & (kBlock - 1));
    }
    const T *data(std::size_t i) const
    {
        assert(i < m_size);
        return m_blocks[i >> kShift].data() + (i & (kBlock - 1));
    }
    void clear()
    {
        m_blocks.clear();
        m_size = 0;
    }
    std::size_t size() const { return m_size; }
    bool empty() const { return m_size == 0; }
    const T &operator[](std::size_t i) const
    {
        assert(i < m_size);
        return m_blocks[i >> kShift][i & (kBlock - 1)];
    }
    const T &front() const { return (*this)[0]; }
    const T &back() const { return (*this)[m_size - 1]; }
    const_iterator begin() const { return { this, 0 }; }
    const_iterator end() const { return { this, m_size }; }

private:
    std::vector<std::vector<T>> m_blocks;
    std::size_t m_size = 0;
};

} // namespace scalelab::core

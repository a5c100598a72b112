#pragma once

// SHA-256 (LFS files) or git's SHA-1 blob id (small files kept in git) over streamed bytes.
// OpenSSL's digests use the CPU's SHA extensions: hashing keeps up with the network where a
// portable implementation would be the bottleneck.

#include <openssl/evp.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace vireo::hub {

class Digest {
public:
    // sha256 false: git's blob id, which hashes "blob <size>\0" before the content.
    Digest(bool sha256, std::uint64_t size) : m_ctx(EVP_MD_CTX_new())
    {
        EVP_DigestInit_ex(m_ctx, sha256 ? EVP_sha256() : EVP_sha1(), nullptr);
        if (!sha256) {
            const std::string header = "blob " + std::to_string(size);
            add(header.c_str(), header.size() + 1);  // with its NUL
        }
    }
    ~Digest() { EVP_MD_CTX_free(m_ctx); }
    Digest(const Digest&) = delete;
    Digest& operator=(const Digest&) = delete;
    void add(const void* data, std::size_t bytes) { EVP_DigestUpdate(m_ctx, data, bytes); }
    std::string hex()
    {
        unsigned char out[EVP_MAX_MD_SIZE];
        unsigned int length = 0;
        EVP_DigestFinal_ex(m_ctx, out, &length);
        static const char* digits = "0123456789abcdef";
        std::string s;
        for (unsigned int i = 0; i < length; ++i) {
            s += digits[out[i] >> 4];
            s += digits[out[i] & 0xF];
        }
        return s;
    }

private:
    EVP_MD_CTX* m_ctx;
};

}  // namespace vireo::hub

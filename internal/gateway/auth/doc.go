// Package auth authenticates tenants and the provider on the gateway: X.509
// certificates registered on the ledger (mTLS, revocation honoured) and bearer JWTs
// signed with an account's ledger key (ES256K, or ES256KADR36 as browser wallets sign),
// with scopes. It also makes and loads the provider's own TLS certificate, chooses which
// certificate the gateway serves for a server name (ServerCertificates: mtls.<host> gets
// the ledger's), and reads client certificates made elsewhere, such as by Akash's tools
// (ParseClientPEM).
//
// An Authenticator is safe for concurrent use; it caches what it read from the ledger
// for a short time (CacheTTL), which bounds how long a revoked certificate keeps
// working. ServerCertificates and Reloader are safe for concurrent handshakes.
// ParseClientPEM and CheckClientCertificate keep no state.
package auth

// Package rest is the tenant gateway's HTTPS transport: Akash's REST routes and
// websockets over TLS 1.3, with every tenant route authenticated (client certificate
// or bearer token) and authorized to the lease owner. Handlers only translate: the
// work is done by the components behind the small interfaces in Deps, and domain
// errors become HTTP statuses in one place (errors.go).
//
// A Server is safe for concurrent use; Serve returns after every connection's
// handler has finished.
package rest

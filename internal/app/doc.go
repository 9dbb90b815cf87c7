// Package app is berth's composition root: it builds the components a command needs
// from typed configuration and runs them until the context ends, returning only after
// every goroutine it started has exited. cmd/berth only parses flags and calls into
// it, or into dev and bench, which build their environments from its parts.
package app

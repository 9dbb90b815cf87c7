// Package app is berth's composition root: it builds the components a command needs
// from typed configuration and runs them until the context ends, returning only after
// every goroutine and child process it started has exited. It is the only package that
// imports all the others; cmd/berth only parses flags and calls into it.
package app

package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"berth.dev/berth/internal/gateway/client"
)

// terminal puts standard input in raw mode for a remote TTY (when it is a terminal)
// and reports its size now and on each SIGWINCH. restore undoes it all.
func terminal(cmd *cobra.Command, tty bool) (restore func(), resize <-chan client.TerminalSize, err error) {
	in, ok := cmd.InOrStdin().(*os.File)
	if !tty || !ok || !term.IsTerminal(int(in.Fd())) {
		return func() {}, nil, nil
	}
	fd := int(in.Fd())
	state, err := term.MakeRaw(fd)
	if err != nil {
		return nil, nil, err
	}
	// One size waits at most: a newer one replaces it, so the last size is the one
	// that arrives.
	ch := make(chan client.TerminalSize, 1)
	send := func() {
		w, h, err := term.GetSize(fd)
		if err != nil {
			return
		}
		sz := client.TerminalSize{Width: uint16(min(w, 65535)), Height: uint16(min(h, 65535))} //nolint:gosec // clamped
		for {
			select {
			case ch <- sz:
				return
			default:
				select {
				case <-ch:
				default:
				}
			}
		}
	}
	send()
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-winch:
				send()
			}
		}
	}()
	return func() {
		signal.Stop(winch)
		close(done)
		_ = term.Restore(fd, state)
	}, ch, nil
}

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// receive is a chat receiver for the demo: it accepts Slack/Mattermost-style webhook posts and
// prints the message text, so people see what the on-call channel would see.
func receive(listen string) error {
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var msg struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(body, &msg)
		text := msg.Text
		if text == "" {
			text = string(body)
		}
		fmt.Printf("\n┌── chat message received %s ──\n", time.Now().Format("15:04:05.000"))
		for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
			fmt.Printf("│ %s\n", l)
		}
		fmt.Println("└──")
		_, _ = io.WriteString(w, "ok")
	})
	fmt.Fprintf(os.Stderr, "chat receiver listening on %s\n", listen)
	return http.ListenAndServe(listen, nil)
}

package webhook_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/clearancehq/clearance/webhook"
)

// A receiver checks the signature over the raw body before it parses it,
// then processes each delivery id once.
func ExampleVerify() {
	secret := []byte("a-long-random-secret-you-keep")
	seen := map[string]bool{}
	receiver := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "unreadable", http.StatusBadRequest)
			return
		}
		if err := webhook.Verify(r.Header.Get(webhook.HeaderSignature), body, secret, time.Now(), 0); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		id := r.Header.Get(webhook.HeaderDeliveryID)
		if !seen[id] {
			seen[id] = true
			fmt.Println("processing", r.Header.Get(webhook.HeaderEvent), id)
		}
		w.WriteHeader(http.StatusNoContent)
	})

	body := []byte(`{"type":"decision.resolved","protocol_outcome":"BLOCK"}`)
	send := func(signature string) int {
		req := httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader(string(body)))
		req.Header.Set(webhook.HeaderEvent, "decision.resolved")
		req.Header.Set(webhook.HeaderDeliveryID, "0b6f7c1e-0000-5000-8000-000000000001")
		req.Header.Set(webhook.HeaderSignature, signature)
		w := httptest.NewRecorder()
		receiver.ServeHTTP(w, req)
		return w.Code
	}
	fmt.Println(send(webhook.Sign(body, time.Now(), secret)))
	fmt.Println(send(webhook.Sign(body, time.Now(), secret))) // a retry: same id, not processed again
	fmt.Println(send(webhook.Sign(body, time.Now(), []byte("another secret"))))
	fmt.Println(send(webhook.Sign(body, time.Now().Add(-10*time.Minute), secret)))
	// Output:
	// processing decision.resolved 0b6f7c1e-0000-5000-8000-000000000001
	// 204
	// 204
	// 401
	// 401
}

package apiclient

// A caller of the generated client: the test builds this file into the
// generated package, so it fails when a name or a type the document
// promises changes (an operation renamed, a number narrowed).

import (
	"context"
	"fmt"
	"net/http"
)

// Numbers keep their width: an amount is a float64 (a float32 keeps about
// 7 digits and turns 1234567.89 into 1234567.9) and ledger sequence
// numbers are int64.
var (
	_ *float64 = new(Amount)
	_ *float64 = new(RiskScore)
	_ int64    = LedgerEntry{}.Seq
	_ int64    = Decision{}.LedgerSeq
)

// evaluateRefund asks for a decision on a refund and returns its outcome,
// or the problem's stable code as an error.
func evaluateRefund(ctx context.Context, server, apiKey string) (Outcome, error) {
	client, err := NewClientWithResponses(server, WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+apiKey)
		return nil
	}))
	if err != nil {
		return "", err
	}
	amount := Amount(1234567.89)
	decisionType, workflow := "REFUND", "refunds"
	res, err := client.EvaluateDecisionWithResponse(ctx, &EvaluateDecisionParams{}, EvaluateDecisionJSONRequestBody{
		DecisionType: &decisionType,
		WorkflowKey:  &workflow,
		Amount:       &amount,
	})
	if err != nil {
		return "", err
	}
	if res.JSON200 == nil {
		if p := res.ApplicationproblemJSON400; p != nil {
			return "", fmt.Errorf("%s: %s", p.Code, p.Detail)
		}
		return "", fmt.Errorf("evaluate-decision answered %s", res.Status())
	}
	return res.JSON200.Outcome, nil
}

// claim claims an execution grant; only a 200 with should_execute true
// authorizes the action, a refused claim (409) never does.
func claim(ctx context.Context, client *ClientWithResponses, token string, intentHash Digest) (string, error) {
	res, err := client.ClaimExecutionTokenWithResponse(ctx, &ClaimExecutionTokenParams{}, ClaimExecutionTokenJSONRequestBody{
		ExecutionToken: token,
		IntentHash:     intentHash,
	})
	if err != nil {
		return "", err
	}
	if res.JSON200 != nil && res.JSON200.ShouldExecute {
		return res.JSON200.ClaimToken, nil
	}
	if refused := res.JSON409; refused != nil {
		return "", fmt.Errorf("claim refused: %s", refused.Code)
	}
	return "", fmt.Errorf("claim-token answered %s", res.Status())
}

var (
	_ = evaluateRefund
	_ = claim
)

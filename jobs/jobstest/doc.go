// Package jobstest is the conformance suite for the jobs part of a
// store.Backend: the jobs.Tx its transactions provide and the jobs.Reader
// it implements, driven through the functions of package jobs as a worker
// drives them (one call per Update). Every backend runs it through
// storetest.All, which calls
//
//	jobstest.Run(t, jobstest.Harness{Open: ..., Reopen: ...})
//
// Open gets the clock the backend must use as its store clock (Tx.Now and
// DueJobs), so the suite moves time instead of sleeping; one test passes
// nil and waits on the backend's own clock. The suite checks that:
//
//   - a job reads back (Job, JobInTx) with every field, enqueueing an id
//     again changes nothing, and claim → heartbeat → finish moves it
//     through queued, running and done;
//   - DueJobs lists the queued jobs and the running ones whose lease has
//     passed by the store's clock, of one kind, in every org, ordered by
//     (Due, OrgID, ID), honouring limit, and no finished job;
//   - two workers never own one job: 32 goroutines claiming one job get one
//     claim, and 8 workers draining 40 jobs with ClaimNext claim each once;
//   - an expired lease is taken over (attempts+1); the stale owner's
//     heartbeat, finish, fail and release are refused (ErrNotOwner), as
//     are an owner's after its lease passed (ErrLeaseExpired), exactly at
//     the boundary included;
//   - after a restart (Harness.Reopen) a released job and one whose worker
//     died are resumed;
//   - orgs do not see each other's jobs, a transaction may not write
//     another org's job (jobs.ErrOrgMismatch), an invalid job is refused
//     (jobs.ErrInvalid) leaving the transaction usable, and a failed
//     Update writes nothing.
package jobstest

//! The task state machine. The spec gives no table; this one is derived from
//! v1 §3 and the life-of-a-task topic: SUBMITTED only at creation, WORKING
//! repeatable (progress), interrupted states resume to anything but SUBMITTED,
//! and nothing ever leaves a terminal state.

use heddle_core::v1::TaskState;

/// A transition the state machine refuses (defined in `heddle-api`, since
/// an agent sees it in [`crate::EventError`]).
pub use heddle_api::IllegalTransition;

/// Checks `from -> to`. `from` is `Unspecified` for a task being created.
pub fn check_transition(from: TaskState, to: TaskState) -> Result<(), IllegalTransition> {
    use TaskState as S;
    let ok = match (from, to) {
        (_, S::Unspecified) => false,
        (f, _) if f.is_terminal() => false,
        (S::Unspecified, _) => true,
        (_, S::Submitted) => false,
        (S::Submitted | S::Working, _) => true,
        // Interrupted: the caller answered (or the credential arrived).
        (S::InputRequired | S::AuthRequired, _) => true,
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(IllegalTransition { from, to })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use TaskState as S;

    const ALL: [S; 9] = [
        S::Unspecified,
        S::Submitted,
        S::Working,
        S::Completed,
        S::Failed,
        S::Canceled,
        S::InputRequired,
        S::Rejected,
        S::AuthRequired,
    ];

    #[test]
    fn every_transition_is_decided_by_the_table() {
        for from in ALL {
            for to in ALL {
                let legal = check_transition(from, to).is_ok();
                let expected = to != S::Unspecified
                    && !from.is_terminal()
                    && (from == S::Unspecified || to != S::Submitted);
                assert_eq!(
                    legal,
                    expected,
                    "{} -> {}",
                    from.as_str_name(),
                    to.as_str_name()
                );
            }
        }
    }

    #[test]
    fn terminal_states_are_final() {
        for from in [S::Completed, S::Failed, S::Canceled, S::Rejected] {
            for to in ALL {
                assert!(check_transition(from, to).is_err());
            }
        }
    }

    #[test]
    fn the_writer_flow_is_legal() {
        let flow = [
            S::Unspecified,
            S::Submitted,
            S::Working,
            S::InputRequired,
            S::Working,
            S::Completed,
        ];
        for w in flow.windows(2) {
            check_transition(w[0], w[1]).expect("legal");
        }
    }
}

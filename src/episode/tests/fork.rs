//! ForkEpisode: isolation, scoring against the parent's p_old, caps, all-or-nothing refusals.

use super::*;

const DATE: &str = r#"{"operation": "update", "memory_id": "m0000", "content": "Caroline attended an LGBTQ support group on 7 May 2023 and found the transgender stories inspiring."}"#;

fn fork(parent: &str, count: usize, ids: &[&str], seeds: &[u64]) -> ForkRequest {
    ForkRequest { episode_id: parent.into(), count, fork_ids: ids.iter().map(|s| s.to_string()).collect(), seeds: seeds.to_vec() }
}

async fn memory_count(env: &Environment, id: &str) -> usize {
    env.get_episode(id, false).await.unwrap().0.memory_count
}

#[tokio::test]
async fn forks_copy_the_state_and_are_independent() {
    let env = env();
    env.create_episode(locomo("p", "conv-26:q0")).await.unwrap();
    env.call_tool("p", call("manage_memory", DATE)).await.unwrap();
    let (parent, _) = env.get_episode("p", false).await.unwrap();
    let n0 = parent.memory_count;
    let forks = env.fork_episode(fork("p", 0, &["a", "b"], &[5, 6])).await.unwrap();
    assert_eq!(forks.iter().map(|s| (s.episode_id.as_str(), s.seed, s.steps_used)).collect::<Vec<_>>(), vec![("a", 5, 1), ("b", 6, 1)]);
    assert!(forks.iter().all(|s| s.max_steps == parent.max_steps && s.memory_count == n0 && !s.scored && s.question == parent.question));
    // An edit in one fork is seen by no other episode.
    env.call_tool("a", call("delete_memory", r#"{"memory_id": "m0001"}"#)).await.unwrap();
    env.call_tool("p", call("delete_memory", r#"{"memory_id": "m0002"}"#)).await.unwrap();
    assert_eq!((memory_count(&env, "a").await, memory_count(&env, "b").await, memory_count(&env, "p").await), (n0 - 1, n0, n0 - 1));
    let a = env.get_episode("a", true).await.unwrap();
    assert_eq!((a.0.steps_used, a.1.len()), (2, 2), "the parent's trace, then the fork's own call");
    // Fresh ids when none are given; the parent's seed when no seed is.
    let fresh = env.fork_episode(fork("b", 3, &[], &[])).await.unwrap();
    assert_eq!(fresh.len(), 3);
    assert!(fresh.iter().all(|s| s.episode_id.starts_with("ep-") && s.seed == 6));
    assert_eq!(env.open_episodes(), 6);
}

#[tokio::test]
async fn forks_score_against_the_parents_p_old() {
    let env = env();
    env.create_episode(locomo("p", "conv-26:q0")).await.unwrap();
    env.call_tool("p", call("manage_memory", DATE)).await.unwrap();
    env.fork_episode(fork("p", 2, &["a", "b"], &[])).await.unwrap();
    env.call_tool("a", call("delete_memory", r#"{"memory_id": "m0000"}"#)).await.unwrap();
    let (p, a, b) = (env.score_episode("p").await.unwrap(), env.score_episode("a").await.unwrap(), env.score_episode("b").await.unwrap());
    assert_eq!((p.old.p, a.old.p, b.old.p), (0.0, 0.0, 0.0), "M₀ says \"recently\": p_old = 0 for the parent and both forks");
    assert_eq!((p.new.p, b.new.p), (1.0, 1.0), "b holds the parent's edit");
    assert_eq!(p.reward, b.reward, "the same memory scores the same");
    assert!(a.reward < b.reward, "a deleted the edited memory");
}

#[tokio::test]
async fn refusals_open_no_fork() {
    let mut config = EnvConfig::default();
    config.limits.max_open_episodes = 3;
    let (env, _) = env_with(config, Arc::new(SystemClock::default()));
    env.create_episode(locomo("p", "conv-26:q0")).await.unwrap();
    // The cap: 3 forks would make 4 episodes; none is opened.
    assert!(matches!(env.fork_episode(fork("p", 3, &[], &[])).await, Err(EpisodeError::ResourceExhausted { .. })));
    assert_eq!(env.open_episodes(), 1);
    // A live id among the forks: AlreadyExists, and the fork made before it is withdrawn.
    env.create_episode(locomo("taken", "conv-26:q1")).await.unwrap();
    assert!(matches!(env.fork_episode(fork("p", 0, &["x", "taken"], &[])).await, Err(EpisodeError::AlreadyExists { .. })));
    assert_eq!(env.open_episodes(), 2);
    assert!(matches!(env.get_episode("x", false).await, Err(EpisodeError::EpisodeNotFound { .. })), "withdrawn, not remembered");
    // Bad requests name the field.
    for (req, field) in [
        (fork("p", 0, &["a", "a"], &[]), "fork_ids[1]"),
        (fork("p", 0, &["p"], &[]), "fork_ids[0]"),
        (fork("p", 0, &["bad id"], &[]), "fork_ids[0]"),
        (fork("p", 2, &[], &[1]), "seeds"),
        (fork("p", MAX_FORKS + 1, &[], &[]), "count"),
    ] {
        let e = env.fork_episode(req).await.unwrap_err();
        assert!(matches!(&e, EpisodeError::InvalidArgument(crate::util::invalid::Invalid { field: f, .. }) if f == field), "{field}: {e}");
    }
    assert!(matches!(env.fork_episode(fork("nope", 1, &[], &[])).await, Err(EpisodeError::EpisodeNotFound { .. })));
    // A scored parent, and a closed one, are refused.
    env.score_episode("taken").await.unwrap();
    assert!(matches!(env.fork_episode(fork("taken", 1, &[], &[])).await, Err(EpisodeError::FailedPrecondition { .. })));
    env.close_episode("taken").await.unwrap();
    assert!(matches!(env.fork_episode(fork("taken", 1, &[], &[])).await, Err(EpisodeError::EpisodeEnded { .. })));
    assert_eq!(env.open_episodes(), 1);
}

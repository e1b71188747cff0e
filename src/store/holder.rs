//! Which Emacs runs an agent of a shared list: its host and process id,
//! and whether that process still lives, so that two Emacsen's agents of
//! one type get two names and a dead Emacs's agent frees its name.

use once_cell::sync::Lazy;

use crate::model::now;
use crate::session::PeerLease;

/// This Emacs: "HOST:PID".
static THIS: Lazy<String> = Lazy::new(|| format!("{}:{}", host(), std::process::id()));

/// How long an agent of an Emacs on another host counts as running
/// without a word from it: its process cannot be asked from here.
const FOREIGN_LEASE_SECONDS: f64 = 24.0 * 60.0 * 60.0;

/// The longest holder kept from a file.
pub const MAX_HOLDER_CHARS: usize = 300;

/// This Emacs, as the holder of the agents it runs.
pub fn this_holder() -> &'static str {
    &THIS
}

#[cfg(unix)]
fn host() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most the length given into a buffer
    // this function owns.
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

#[cfg(not(unix))]
fn host() -> String {
    String::new()
}

/// Whether the process HOLDER names may still run: on this host, whether
/// it lives; on another, whether the lease began within a day.
fn may_run(holder: &str, since: f64) -> bool {
    let Some((host, pid)) = holder.rsplit_once(':') else {
        return false;
    };
    let this_host = THIS.rsplit_once(':').map_or("", |(host, _)| host);
    if host != this_host {
        return now() - since < FOREIGN_LEASE_SECONDS;
    }
    match pid.parse::<i32>() {
        Ok(pid) if pid > 0 => alive(pid),
        _ => false,
    }
}

#[cfg(unix)]
fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 sends nothing; it only asks whether PID exists.
    let sent = unsafe { libc::kill(pid, 0) };
    sent == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(not(unix))]
fn alive(_pid: i32) -> bool {
    true
}

/// The leases of other Emacsen among LEASES whose agents may still run.
pub fn others_running(leases: impl IntoIterator<Item = PeerLease>) -> Vec<PeerLease> {
    leases
        .into_iter()
        .filter(|lease| lease.holder != this_holder() && may_run(&lease.holder, lease.since))
        .collect()
}

/// Forgets the agents of SESSION that other Emacsen ran and no longer do
/// (their Emacs died), so that their names are free again.
pub fn forget_dead_peers(session: &mut crate::session::Session) {
    let alive = others_running(session.agents.elsewhere().to_vec());
    session.agents.set_elsewhere(alive);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: &str, since: f64) -> PeerLease {
        PeerLease {
            name: "efrit".into(),
            holder: holder.into(),
            since,
        }
    }

    #[test]
    fn this_emacs_and_dead_ones_are_not_others_running() {
        let host = this_holder().rsplit_once(':').unwrap().0.to_string();
        let parent = format!("{host}:{}", unsafe { libc::getppid() });
        let dead = {
            let mut child = std::process::Command::new("true").spawn().unwrap();
            let pid = child.id();
            child.wait().unwrap();
            format!("{host}:{pid}")
        };
        let kept = others_running([
            lease(this_holder(), now()),
            lease(&parent, now()),
            lease(&dead, now()),
            lease("elsewhere.example:42", now()),
            lease("elsewhere.example:43", now() - 2.0 * FOREIGN_LEASE_SECONDS),
            lease("no pid", now()),
        ]);
        let holders: Vec<&str> = kept.iter().map(|l| l.holder.as_str()).collect();
        assert_eq!(holders, [parent.as_str(), "elsewhere.example:42"]);
    }
}

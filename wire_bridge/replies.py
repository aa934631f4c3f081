"""What Jeeves says for the commands the bridge answers itself: state, context, housekeeping, and the
outcome of the commands that write (done, supersede, the staleness and contradiction buttons).

Voice: docs/architecture.md §7; the state replies' fixed wording: docs/wire-protocols.md §8.
"""

from __future__ import annotations

# Fixed wording (docs/wire-protocols.md §8).
RESUMED = "Very good. I shall resume my duties forthwith."
PAUSED = "Understood. I shall step out. Do let me know when you require my attention again."
SECURED = (
    "Of course. I have cleared my short-term recollection of this channel and shall disregard all "
    "proceedings until further notice."
)

ALREADY_ACTIVE = "I am already attending to this channel, and shall continue to do so."
ALREADY_PAUSED = "I have already stepped out, and shall remain so until you require my attention."
ALREADY_SECURE = (
    "My short-term recollection of this channel remains cleared, and I continue to disregard all proceedings."
)
STILL_SECURE = (
    "One notes that secure mode remains in force. I shall go on disregarding all proceedings until "
    'someone says "ears on".'
)

CONTEXT_PURPOSE = "Very good. I have noted the purpose of this channel."
CONTEXT_TYPE = "Very good. I have noted that this is a {value} channel."
CONTEXT_TYPE_UNKNOWN = (
    "I'm afraid I know only four kinds of channel: customer, project, team and general. Shall I note one of those?"
)
CONTEXT_TAGS = "Very good. I have noted the tags: {value}."
CONTEXT_STAKEHOLDERS = "Very good. I have noted the stakeholders: "
CONTEXT_RELATED = "Very good. I have noted the related channels: {value}."
CONTEXT_EMPTY = (
    "I'm afraid I did not quite catch what I am to note. Shall we try "
    '"@{handle} context: a line on what this channel is for"?'
)

DISMISSED = "Very good. I shall let the matter rest."
EMPTY = 'At your service. Should you wish to know what I can do, simply say "@{handle} help".'
TOO_MANY_QUESTIONS = (
    "You have kept me rather busy this past minute. Might I trouble you to ask again in a moment? "
    "I shall be glad to attend to it then."
)
EXPIRED = "I'm afraid your request slipped away before I could attend to it. Might I trouble you to ask once more?"
BUTTON_LAPSED = "I'm afraid that choice has lapsed. Shall I be asked afresh?"
BUTTON_UNKNOWN = "I'm afraid I do not recognise that choice."
ACTION_DONE = "Very good. I have marked {value} as done: {description}"
ACTION_ID_UNKNOWN = "I'm afraid I did not recognise that action number. It should look like ACT-0003."
SUPERSEDED = "Very good. {old} is now recorded as superseded by {new}; its history is kept."
DECISION_IDS_UNKNOWN = "I'm afraid I did not recognise those decision numbers. They should look like DEC-0002."
NO_RECORD_OF = "I'm afraid I have no record of {value} in this channel."
NO_RECORD_OF_BOTH = "I'm afraid I have no record of both {old} and {new} in this channel."
CANNOT = "I'm afraid I cannot do that: {reason}."
STALE_STILL_OPEN = "Very good. I shall note that {value} remains in hand."
STALE_CANCELLED = "Very good. I shall consider {value} withdrawn."
CONTRADICTION_KEPT = "Very good. I shall regard both decisions as standing."
DIGEST_ON = (
    "Very good. Every Monday at eight I shall send you here a note of your open actions and of the "
    'decisions that name you. "digest off" will stop it.'
)
DIGEST_OFF = "Very good. I shall send no more Monday notes."
DIGEST_PRIVATE_ONLY = (
    "I should be glad to, though such a note is best kept between ourselves. Might I ask you to say "
    '"digest on" in a one-to-one conversation with me?'
)

HELP = """At your service. You may address me as @{handle}, followed by:
- "pause" or "step out": I stop listening until asked to resume
- "resume", "come back" or "unpause": I listen again
- "secure mode" or "ears off": I forget the recent conversation and disregard all proceedings
- "secure mode off" or "ears on": secure mode ends
- "status": how matters stand in this channel
- "catch me up" or "what did I miss": a summary of what passed since your last message
- "context: …", and "context type|tags|stakeholders|related: …": what this channel is about
- "decisions", "actions" or "actions mine": the current record
- "my week": your open actions, overdue first, and the decisions of the past week that name you
- "digest on" or "digest off", in a one-to-one conversation with me: that note every Monday at eight
- "done ACT-n": an action is complete
- "supersede DEC-n with DEC-m": a decision has been replaced
- "dismiss": I let the matter I raised rest
- "help": this list
Anything else I shall take as a question, and answer from what this channel has recorded."""

"""Two-phase deletion, the parts every service shares: the intent record (intent) and
how intents are sent (sender).
"""

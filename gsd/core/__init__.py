"""The math of the identity, with nothing else: group statistics and the identity (groups), silence
(silent), expected updates and fidelity (update), the group-size law (groupsize), difficulty
weighting (weighting), posteriors (posterior), the trainers' conventions (trainers), the methods
(methods), difficulty fits (difficulty_fit), forgetting old counts (forgetting) and the group-size
advice (advice).

The API's names are also at ``gsd.X`` (``gsd.__all__``); the submodules import numpy and scipy, this
package nothing.
"""
